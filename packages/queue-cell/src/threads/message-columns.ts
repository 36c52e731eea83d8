import type { NackRef, SendResult } from "../cell-calls.ts";
import type { OutgoingMessage } from "../send-input.ts";
import type { LeasedMessage } from "../store.ts";

/**
 * Messages as they cross between the main thread and a cell thread, by field rather than as
 * objects: a send's on the way in, a lease's on the way out.
 *
 * A send's messages as they cross to a cell thread: every body copied into one buffer, content
 * types in one array. A structured clone of 100 objects each holding its own Uint8Array cost
 * 185 µs here (each body a buffer of its own to serialize and to rebuild); these columns, 34 µs.
 */
export interface MessageColumns {
  columns: true;
  bytes: Uint8Array;
  /** Where each body ends in `bytes`. */
  ends: Uint32Array;
  contentTypes: StringColumn;
  /** Each message's other fields, when any message has one; else undefined. */
  extras: Array<Pick<OutgoingMessage, "delaySeconds" | "attributes" | "sentAt">> | undefined;
}

/**
 * The columns of `messages`, or undefined when any is not what a send takes (not an array, a body
 * not bytes, a content type not a string): those cross as they are, for the cell to refuse with
 * its own words, as a cell on this thread would.
 */
export function toColumns(messages: readonly OutgoingMessage[]): MessageColumns | undefined {
  if (!Array.isArray(messages)) return undefined;
  let total = 0;
  let extras = false;
  for (const m of messages as unknown[]) {
    if (typeof m !== "object" || m === null) return undefined;
    const { body, contentType, delaySeconds, attributes, sentAt } = m as OutgoingMessage;
    if (!(body instanceof Uint8Array) || typeof contentType !== "string") return undefined;
    total += body.byteLength;
    if (delaySeconds !== undefined || attributes !== undefined || sentAt !== undefined) extras = true;
  }
  const bytes = new Uint8Array(total);
  const ends = new Uint32Array(messages.length);
  const contentTypes: string[] = [];
  let at = 0;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    bytes.set(m.body, at);
    at += m.body.byteLength;
    ends[i] = at;
    contentTypes.push(m.contentType);
  }
  return {
    columns: true,
    bytes,
    ends,
    contentTypes: packStrings(contentTypes),
    extras: extras ? messages.map(({ delaySeconds, attributes, sentAt }) => ({ delaySeconds, attributes, sentAt })) : undefined,
  };
}

/** The messages again, each body a Buffer view of the one buffer (nothing copied). */
export function fromColumns(columns: MessageColumns): OutgoingMessage[] {
  const { bytes, ends, extras } = columns;
  const contentTypes = unpackStrings(columns.contentTypes) as string[];
  const messages: OutgoingMessage[] = [];
  let start = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i]!;
    const body = Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start);
    const extra = extras?.[i];
    messages.push(extra === undefined ? { body, contentType: contentTypes[i]! } : { body, contentType: contentTypes[i]!, ...definedOf(extra) });
    start = end;
  }
  return messages;
}

export function isColumns(value: unknown): value is MessageColumns {
  return typeof value === "object" && value !== null && (value as { columns?: unknown }).columns === true;
}

function definedOf(extra: Pick<OutgoingMessage, "delaySeconds" | "attributes" | "sentAt">): Partial<OutgoingMessage> {
  const out: Partial<OutgoingMessage> = {};
  if (extra.delaySeconds !== undefined) out.delaySeconds = extra.delaySeconds;
  if (extra.attributes !== undefined) out.attributes = extra.attributes;
  if (extra.sentAt !== undefined) out.sentAt = extra.sentAt;
  return out;
}

/** A lease's answer as it crosses back: what LeasedMessage holds, by field, bodies in one buffer. */
export interface LeasedColumns {
  leased: true;
  ids: StringColumn;
  /** leaseGeneration, deliveries, sentAt, enqueuedAt, availableAt, leaseExpiresAt of each message. */
  numbers: Float64Array;
  contentTypes: StringColumn;
  attributes: StringColumn;
  bytes: Uint8Array;
  ends: Uint32Array;
}

const leasedNumbers = 6;

/**
 * Columns of leased messages. Only LeasedMessage's fields cross (a store's row holds more, which
 * no caller of a lease reads). A clone of 100 leased rows, each an object of 15 fields with its own
 * body view, cost most of a lease's hop.
 */
export function leasedToColumns(messages: readonly LeasedMessage[]): LeasedColumns {
  const n = messages.length;
  const numbers = new Float64Array(n * leasedNumbers);
  const ends = new Uint32Array(n);
  const ids: string[] = [];
  const contentTypes: string[] = [];
  const attributes: Array<string | null> = [];
  let total = 0;
  for (const m of messages) total += m.body.byteLength;
  const bytes = new Uint8Array(total);
  let at = 0;
  for (let i = 0; i < n; i++) {
    const m = messages[i]!;
    ids.push(m.id);
    contentTypes.push(m.contentType);
    attributes.push(m.attributes);
    const k = i * leasedNumbers;
    numbers[k] = m.leaseGeneration;
    numbers[k + 1] = m.deliveries;
    numbers[k + 2] = m.sentAt;
    numbers[k + 3] = m.enqueuedAt;
    numbers[k + 4] = m.availableAt;
    numbers[k + 5] = m.leaseExpiresAt;
    bytes.set(m.body, at);
    at += m.body.byteLength;
    ends[i] = at;
  }
  return { leased: true, ids: packStrings(ids), numbers, contentTypes: packStrings(contentTypes), attributes: packStrings(attributes), bytes, ends };
}

/** The leased messages again, each body a Buffer view of the one buffer (nothing copied). */
export function leasedFromColumns(columns: LeasedColumns): LeasedMessage[] {
  const { numbers, bytes, ends } = columns;
  const ids = unpackStrings(columns.ids) as string[];
  const contentTypes = unpackStrings(columns.contentTypes) as string[];
  const attributes = unpackStrings(columns.attributes);
  const messages: LeasedMessage[] = [];
  let start = 0;
  for (let i = 0; i < ids.length; i++) {
    const k = i * leasedNumbers;
    const end = ends[i]!;
    messages.push({
      id: ids[i]!,
      leaseGeneration: numbers[k]!,
      deliveries: numbers[k + 1]!,
      sentAt: numbers[k + 2]!,
      enqueuedAt: numbers[k + 3]!,
      availableAt: numbers[k + 4]!,
      leaseExpiresAt: numbers[k + 5]!,
      contentType: contentTypes[i]!,
      attributes: attributes[i]!,
      body: Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start),
    });
    start = end;
  }
  return messages;
}

/** Lease refs (acks, nacks, releases) as they cross to the thread: ids and numbers by field. */
export interface RefColumns {
  refs: true;
  ids: StringColumn;
  generations: Float64Array;
  /** Each nack's delaySeconds, NaN where it names none; undefined when none names one. */
  delays: Float64Array | undefined;
}

/**
 * The columns of `refs`, or undefined when any is not a ref (an id not a string, a generation or
 * a delay not a number): those cross as they are, for the cell to refuse in its own words.
 */
export function refsToColumns(refs: readonly NackRef[]): RefColumns | undefined {
  if (!Array.isArray(refs)) return undefined;
  let delays = false;
  for (const ref of refs as unknown[]) {
    if (typeof ref !== "object" || ref === null) return undefined;
    const { id, leaseGeneration, delaySeconds } = ref as NackRef;
    if (typeof id !== "string" || typeof leaseGeneration !== "number") return undefined;
    if (delaySeconds !== undefined) {
      if (typeof delaySeconds !== "number" || Number.isNaN(delaySeconds)) return undefined;
      delays = true;
    }
  }
  const generations = new Float64Array(refs.length);
  const delayColumn = delays ? new Float64Array(refs.length) : undefined;
  const ids: string[] = [];
  for (let i = 0; i < refs.length; i++) {
    const ref = refs[i]!;
    ids.push(ref.id);
    generations[i] = ref.leaseGeneration;
    if (delayColumn !== undefined) delayColumn[i] = ref.delaySeconds ?? Number.NaN;
  }
  return { refs: true, ids: packStrings(ids), generations, delays: delayColumn };
}

export function refsFromColumns(columns: RefColumns): NackRef[] {
  const { generations, delays } = columns;
  const ids = unpackStrings(columns.ids) as string[];
  const refs: NackRef[] = [];
  for (let i = 0; i < ids.length; i++) {
    const delaySeconds = delays?.[i];
    refs.push(delaySeconds === undefined || Number.isNaN(delaySeconds) ? { id: ids[i]!, leaseGeneration: generations[i]! } : { id: ids[i]!, leaseGeneration: generations[i]!, delaySeconds });
  }
  return refs;
}

export function isRefColumns(value: unknown): value is RefColumns {
  return typeof value === "object" && value !== null && (value as { refs?: unknown }).refs === true;
}

/**
 * The buffers of columns that `value` is or holds (a send's, a lease's, refs, a settle's acks and
 * nacks), to be transferred rather than copied once more: each was allocated for the crossing
 * and nothing else holds it. Anything else (a caller's own buffers) is copied.
 */
export function columnBuffers(value: unknown): ArrayBuffer[] {
  if (typeof value !== "object" || value === null) return [];
  const views: Array<ArrayBufferView | undefined> = [];
  if (isColumns(value)) views.push(value.bytes, value.ends);
  else if ((value as { leased?: unknown }).leased === true) {
    const leased = value as LeasedColumns;
    views.push(leased.bytes, leased.numbers, leased.ends);
  } else if (isRefColumns(value)) views.push(value.generations, value.delays);
  else {
    const { acks, nacks } = value as { acks?: unknown; nacks?: unknown };
    if (isRefColumns(acks)) views.push(acks.generations, acks.delays);
    if (isRefColumns(nacks)) views.push(nacks.generations, nacks.delays);
  }
  const buffers = new Set<ArrayBuffer>();
  for (const view of views) {
    // Only a view over the whole of a buffer of its own: what the builders above allocate.
    if (view !== undefined && view.byteOffset === 0 && view.byteLength === view.buffer.byteLength && view.buffer instanceof ArrayBuffer) buffers.add(view.buffer);
  }
  return [...buffers];
}

/**
 * A column of strings as it crosses: one value repeated (a batch's content types, attributes
 * mostly null), or every string in one with where each ends (ids), else the list as it is. A
 * structured clone writes and rebuilds each string of a list on its own: for a lease's 100 ids,
 * content types and attributes that was 60-80 µs a crossing here, against 20-40 µs packed.
 */
export type StringColumn =
  | { each: string | null; count: number }
  | { text: string; ends: Uint32Array }
  | { list: Array<string | null> };

export function packStrings(values: ReadonlyArray<string | null>): StringColumn {
  const first = values[0] ?? null;
  let same = true;
  let strings = true;
  for (const v of values) {
    if (v !== first) same = false;
    if (typeof v !== "string") strings = false;
  }
  if (same) return { each: first, count: values.length };
  if (!strings) return { list: [...values] };
  const ends = new Uint32Array(values.length);
  let at = 0;
  for (let i = 0; i < values.length; i++) {
    at += (values[i] as string).length;
    ends[i] = at;
  }
  return { text: values.join(""), ends };
}

export function unpackStrings(column: StringColumn): Array<string | null> {
  if ("list" in column) return column.list;
  if ("each" in column) return new Array<string | null>(column.count).fill(column.each);
  const out: string[] = new Array(column.ends.length);
  let start = 0;
  for (let i = 0; i < column.ends.length; i++) {
    const end = column.ends[i]!;
    out[i] = column.text.slice(start, end);
    start = end;
  }
  return out;
}

/** A send's answer as it crosses back: its ids packed. */
export interface SendResultColumns {
  sendResult: true;
  ids: StringColumn;
  metrics: SendResult["metrics"];
}

export function sendResultToColumns(result: SendResult): SendResultColumns {
  return { sendResult: true, ids: packStrings(result.ids), metrics: result.metrics };
}

export function sendResultFromColumns(columns: SendResultColumns): SendResult {
  return { ids: unpackStrings(columns.ids) as string[], metrics: columns.metrics };
}
