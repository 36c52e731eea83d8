/**
 * Writes `v8Flags` into a serialized workerd config: a Cap'n Proto message (standard stream
 * framing, unpacked) whose root is workerd's `Config` struct. Miniflare builds that message and
 * has no option for the field (see miniflare-v8-flags.ts), so celld adds it to the bytes.
 *
 * Cap'n Proto pointers are relative to their own segment, so words appended to the end of the
 * first segment leave every existing pointer valid; the only other change is that segment's size
 * in the frame header. The flags' list and texts go there, and the root's `v8Flags` slot, which
 * must be empty, points at them.
 */

/** From workerd's workerd.capnp: `Config.v8Flags @2 :List(Text)` is the struct's third pointer. */
const v8FlagsPointerIndex = 2;

const wordBytes = 8;
const structPointer = 0;
const listPointer = 1;
const pointerElements = 6;
const byteElements = 2;

export class WorkerdConfigError extends Error {
  override name = "WorkerdConfigError";
}

/** `message` with `flags` as its root Config's v8Flags; `message` itself is not changed. */
export function withV8Flags(message: Uint8Array, flags: readonly string[]): Uint8Array {
  if (flags.length === 0) return message;
  for (const flag of flags) {
    if (flag === "" || flag.includes("\0")) {
      throw new WorkerdConfigError(`a V8 flag must be a non-empty string without NUL, not ${JSON.stringify(flag)}`);
    }
  }
  const { frame, view: seg0 } = firstSegment(message);
  const root = readStructPointer(seg0, 0);
  if (root === undefined) throw new WorkerdConfigError("the config's root is not a struct in its first segment");
  if (root.pointerWords <= v8FlagsPointerIndex) throw new WorkerdConfigError("the config's root struct has no v8Flags slot");
  const slot = v8FlagsSlot(root);
  if (slot >= frame.segmentWords[0]!) throw new WorkerdConfigError("the config's root struct runs past its segment");
  if (seg0.getBigUint64(slot * wordBytes, true) !== 0n) throw new WorkerdConfigError("the config already sets v8Flags");

  const texts = flags.map((flag) => new TextEncoder().encode(flag));
  const textWords = texts.map((bytes) => Math.ceil((bytes.length + 1) / wordBytes)); // + the NUL Text ends with
  const addedWords = flags.length + textWords.reduce((sum, n) => sum + n, 0);
  const firstAdded = frame.segmentWords[0]!;

  const out = new Uint8Array(message.length + addedWords * wordBytes);
  const seg0End = frame.firstSegmentByte + firstAdded * wordBytes;
  out.set(message.subarray(0, seg0End), 0);
  out.set(message.subarray(seg0End), seg0End + addedWords * wordBytes);
  const view = new DataView(out.buffer);
  view.setUint32(4, firstAdded + addedWords, true);

  const word = (index: number): number => frame.firstSegmentByte + index * wordBytes;
  writeListPointer(view, word(slot), firstAdded - (slot + 1), pointerElements, flags.length);
  let textAt = firstAdded + flags.length;
  texts.forEach((bytes, i) => {
    const pointerAt = firstAdded + i;
    writeListPointer(view, word(pointerAt), textAt - (pointerAt + 1), byteElements, bytes.length + 1);
    out.set(bytes, word(textAt)); // the NUL and padding are already zero
    textAt += textWords[i]!;
  });
  return out;
}

/** The root Config's v8Flags, read back (the tests check both Miniflare's bytes and ours with it). */
export function readV8Flags(message: Uint8Array): string[] {
  const { bytes, view: seg0 } = firstSegment(message);
  const root = readStructPointer(seg0, 0);
  if (root === undefined || root.pointerWords <= v8FlagsPointerIndex) return [];
  const list = readListPointer(seg0, v8FlagsSlot(root));
  if (list === undefined) return [];
  if (list.elementSize !== pointerElements) throw new WorkerdConfigError("v8Flags is not a list of pointers");
  return Array.from({ length: list.count }, (_, i) => {
    const text = readListPointer(seg0, list.startWord + i);
    if (text === undefined || text.elementSize !== byteElements || text.count < 1) {
      throw new WorkerdConfigError(`v8Flags[${i}] is not a text in the first segment`);
    }
    return new TextDecoder().decode(bytes.subarray(text.startWord * wordBytes, text.startWord * wordBytes + text.count - 1));
  });
}

interface Frame {
  segmentWords: number[];
  firstSegmentByte: number;
}

function readFrame(message: Uint8Array): Frame {
  const view = new DataView(message.buffer, message.byteOffset, message.length);
  if (message.length < wordBytes) throw new WorkerdConfigError("the config message is too short to hold its frame header");
  const segmentCount = view.getUint32(0, true) + 1;
  const headerBytes = Math.ceil((4 + 4 * segmentCount) / wordBytes) * wordBytes;
  if (message.length < headerBytes) throw new WorkerdConfigError("the config message is shorter than its frame header");
  const segmentWords = Array.from({ length: segmentCount }, (_, i) => view.getUint32(4 + 4 * i, true));
  const total = headerBytes + segmentWords.reduce((sum, n) => sum + n, 0) * wordBytes;
  if (total !== message.length) {
    throw new WorkerdConfigError(`the config message is ${message.length} bytes but its frame header says ${total}`);
  }
  if (segmentWords[0]! < 1) throw new WorkerdConfigError("the config message's first segment is empty");
  return { segmentWords, firstSegmentByte: headerBytes };
}

/** The message's frame, and its first segment as bytes and as a view (word 0 is the root pointer). */
function firstSegment(message: Uint8Array): { frame: Frame; bytes: Uint8Array; view: DataView } {
  const frame = readFrame(message);
  const bytes = message.subarray(frame.firstSegmentByte, frame.firstSegmentByte + frame.segmentWords[0]! * wordBytes);
  return { frame, bytes, view: new DataView(bytes.buffer, bytes.byteOffset, bytes.length) };
}

/** The word of the root Config's v8Flags pointer: after its data section, the third pointer. */
function v8FlagsSlot(root: StructPointer): number {
  return root.startWord + root.dataWords + v8FlagsPointerIndex;
}

interface StructPointer {
  startWord: number;
  dataWords: number;
  pointerWords: number;
}

function readStructPointer(seg: DataView, at: number): StructPointer | undefined {
  const low = seg.getInt32(at * wordBytes, true);
  if ((low & 3) !== structPointer || (low === 0 && seg.getUint32(at * wordBytes + 4, true) === 0)) return undefined;
  return {
    startWord: at + 1 + (low >> 2),
    dataWords: seg.getUint16(at * wordBytes + 4, true),
    pointerWords: seg.getUint16(at * wordBytes + 6, true),
  };
}

function readListPointer(seg: DataView, at: number): { startWord: number; elementSize: number; count: number } | undefined {
  const low = seg.getInt32(at * wordBytes, true);
  const high = seg.getUint32(at * wordBytes + 4, true);
  if (low === 0 && high === 0) return undefined;
  if ((low & 3) !== listPointer) throw new WorkerdConfigError(`the pointer at word ${at} is not a list in the same segment`);
  return { startWord: at + 1 + (low >> 2), elementSize: high & 7, count: high >>> 3 };
}

function writeListPointer(view: DataView, byte: number, offsetWords: number, elementSize: number, count: number): void {
  view.setInt32(byte, (offsetWords << 2) | listPointer, true);
  view.setUint32(byte + 4, ((count << 3) | elementSize) >>> 0, true);
}
