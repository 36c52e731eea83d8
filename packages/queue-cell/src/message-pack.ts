import { CellError } from "./errors.ts";
import { limits } from "./limits.ts";
import type { NewMessage } from "./store.ts";
import { isUlidRun, ulidRun } from "./ulid-text.ts";

/**
 * A pack is the messages of one send kept in one row of the store: the row holds what they share
 * (state, times, delivery count, lease) once, and each message's own fields in a JSON list beside
 * their bodies end to end. A sendBatch of 100 that is leased and acked whole is then one insert,
 * one update and one delete instead of 100 of each. Whatever treats its messages differently (a
 * retry of one, a lease that takes part of it) first unpacks it into one row per message, with the
 * seqs the pack held for them, so the rest of the store sees ordinary rows.
 *
 * A message in a pack has seq `packSeq + index`: a pack of n holds the seqs from its own to its
 * own + n - 1, and no other row takes them.
 */

/** The most messages one pack holds: the largest send. */
export const packMessagesMax = limits.batchMessagesMax;

/** One message's own fields in a pack's list. */
export type PackEntry = [id: string, sentAt: number, contentType: string, attributes: string | null, bytes: number, bodyLength: number];

/**
 * A pack's list as stored: in full, a PackEntry a message; or short, when the messages share their
 * sentAt and content type, carry no attributes, and each id is the one after the id before it (see
 * ulidSuccessor), as a cell's ids for one send are. The short list holds the first id, what they
 * share and each body's length: about 5 bytes a message instead of about 65. A pack of small
 * messages then fits its row without overflow pages, and each insert and delete of it writes
 * fewer pages to the log.
 */
export type StoredPackList = PackEntry[] | ShortPackList;

interface ShortPackList {
  first: string;
  sentAt: number;
  contentType: string;
  lengths: number[];
}

export interface EncodedPack {
  /** The JSON of the StoredPackList. */
  entries: string;
  /** Every body, end to end, in list order. */
  body: Buffer;
  bytes: number;
}

/** What the store counts a message as: its body and its attributes. */
export function messageBytes(row: Pick<NewMessage, "body" | "attributes">): number {
  return row.body.byteLength + (row.attributes === null ? 0 : Buffer.byteLength(row.attributes));
}

/**
 * Whether `rows` may share one pack: two or more, due and entered at the same time (then they
 * stay alike until one is treated apart), with ids rising strictly and all above `idFloor`, the
 * last id of every pack the store holds. Packs' id ranges then never overlap, which is what lets
 * the store find the one pack that may hold an id with a single index step.
 */
export function canPack(rows: readonly NewMessage[], idFloor: string): boolean {
  if (rows.length < 2 || rows.length > packMessagesMax) return false;
  const first = rows[0]!;
  if (first.id <= idFloor) return false;
  for (let i = 1; i < rows.length; i++) {
    const row = rows[i]!;
    if (row.dueAt !== first.dueAt || row.enqueuedAt !== first.enqueuedAt || row.id <= rows[i - 1]!.id) return false;
  }
  return true;
}

export function encodePack(rows: readonly NewMessage[]): EncodedPack {
  const bodies = rows.map((row) => row.body);
  const first = rows[0]!;
  const sizes = rows.map(messageBytes);
  let bytes = 0;
  for (const size of sizes) bytes += size;
  const list: StoredPackList = isShortable(rows)
    ? { first: first.id, sentAt: first.sentAt, contentType: first.contentType, lengths: bodies.map((body) => body.byteLength) }
    : rows.map((row, i) => [row.id, row.sentAt, row.contentType, row.attributes, sizes[i]!, row.body.byteLength]);
  return { entries: JSON.stringify(list), body: Buffer.concat(bodies), bytes };
}

/** Whether rows' list may be stored short: see StoredPackList. */
function isShortable(rows: readonly NewMessage[]): boolean {
  return (
    rows[0]!.attributes === null &&
    isUlidRun(rows, (row, first) => row.sentAt === first.sentAt && row.contentType === first.contentType && row.attributes === null)
  );
}

/** A pack's list as stored, unchecked: for reading ids and heads. */
export function readPackList(entries: string): PackEntry[] {
  return expandPackList(JSON.parse(entries) as StoredPackList);
}

/** A stored list, full or short, as a PackEntry a message. */
export function expandPackList(list: StoredPackList): PackEntry[] {
  if (Array.isArray(list)) return list;
  const { first, sentAt, contentType, lengths } = list;
  if (typeof first !== "string" || typeof sentAt !== "number" || typeof contentType !== "string" || !Array.isArray(lengths)) {
    throw new CellError("ERR_STORAGE", "the queue's storage failed: a pack's list is neither a list of messages nor a short one");
  }
  const ids = ulidRun(first, lengths.length);
  if (ids.length < lengths.length) {
    throw new CellError("ERR_STORAGE", `the queue's storage failed: a short pack list starting at ${first} runs past the last id`);
  }
  return ids.map((id, i) => [id, sentAt, contentType, null, lengths[i]!, lengths[i]!]);
}

/** A pack's list, checked against its bodies' length: a mismatch means the row is damaged. */
export function decodePackEntries(entries: string, bodyLength: number): PackEntry[] {
  const list = readPackList(entries);
  let total = 0;
  for (const entry of list) total += entry[5];
  if (total !== bodyLength) {
    throw new CellError("ERR_STORAGE", `the queue's storage failed: a pack's bodies come to ${bodyLength} bytes, not the ${total} its list gives`);
  }
  return list;
}

/** Each message's body: a view of the pack's bodies, not a copy, in list order. */
export function packBodies(list: readonly PackEntry[], bodies: Uint8Array): Uint8Array[] {
  let offset = 0;
  return list.map((entry) => {
    const body = new Uint8Array(bodies.buffer, bodies.byteOffset + offset, entry[5]);
    offset += entry[5];
    return body;
  });
}

/** The index of `id` in a pack's list (ids rise strictly in it), or -1. */
export function indexInPack(list: readonly PackEntry[], id: string): number {
  let low = 0;
  let high = list.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const at = list[mid]![0];
    if (at === id) return mid;
    if (at < id) low = mid + 1;
    else high = mid - 1;
  }
  return -1;
}
