// The rows the SQLite store reads, and the messages they become: a row of one message, or a
// pack (see message-pack.ts) expanded into its messages.
import type { LeasableFields } from "./sqlite-sql.ts";
import { decodePackEntries, packBodies, readPackList, type PackEntry } from "./message-pack.ts";
import type { MessageHead, MessageState, StoredMessage } from "./store.ts";

export interface HeadRow {
  seq: number;
  id: string;
  state: MessageState;
  due_at: number;
  deliveries: number;
  lease_generation: number;
  bytes: number;
}

export interface FullRow extends HeadRow {
  sent_at: number;
  enqueued_at: number;
  content_type: string;
  attributes: string | null;
  body: Buffer;
}

/** A head row that may be a pack: then n > 1 and pack lists its messages. */
export interface HeadPackRow extends HeadRow {
  n: number;
  pack: string | null;
}

export interface FullPackRow extends FullRow {
  n: number;
  pack: string | null;
}

/** A pack as unpacking reads it. */
export type PackRow = Pick<FullRow, "seq" | "state" | "due_at" | "deliveries" | "lease_generation" | "enqueued_at" | "body"> & {
  lease_owner: number;
  n: number;
  pack: string;
};

/** A pack as a lease that takes it alone reads it (its attributes are each message's own). */
export type PackToLease = Omit<FullRow, "state" | "attributes"> & { n: number; pack: string };

/** Rows to lease, as lease() reads them: their fields, and their bodies end to end. */
export interface Leasable {
  picked: LeasableFields[];
  bodies: Buffer;
}

export function parseLeasable(found: unknown): Leasable {
  const { fields, bodies } = found as { fields: string; bodies: Buffer | null };
  return { picked: JSON.parse(fields) as LeasableFields[], bodies: bodies ?? Buffer.alloc(0) };
}

/** The pack that holds an id, as packFor reads it, with its list. */
export interface FoundPack {
  row: HeadPackRow & { last_id: string };
  list: PackEntry[];
}

/** A pack an ack names messages of, with what the ack needs to know of it. */
export interface AckedPack extends FoundPack {
  /** The refs that name one of its messages with its current generation, by index. */
  held: Map<number, string>;
}

/** A row removeHeld deleted, as its RETURNING clause lists the columns. */
export type RemovedRow = [id: string, leaseGeneration: number, seq: number, state: MessageState, bytes: number];

/** A row of one message as stored: its fields as a pack of one would list them. */
export function toStored(row: FullRow): StoredMessage {
  const body = new Uint8Array(row.body.buffer, row.body.byteOffset, row.body.byteLength);
  return storedAt(row, 0, [row.id, row.sent_at, row.content_type, row.attributes, row.bytes, body.byteLength], body);
}

export function toHead(row: HeadRow): MessageHead {
  return headAt(row, row.seq, row.id, row.bytes);
}

/** The heads of a row's messages: itself, or each message of a pack. */
export function headsOf(row: HeadPackRow): MessageHead[] {
  if (row.n === 1 || row.pack === null) return [toHead(row)];
  return readPackList(row.pack).map((entry, i) => packHead(row, entry, i));
}

export function packHead(row: HeadRow, entry: PackEntry, index: number): MessageHead {
  return headAt(row, row.seq + index, entry[0], entry[4]);
}

/**
 * The head of the message at `seq`: what the row's messages share, and its own id and size.
 * Built field by field, here and in storedAt: object spread made building a lease's messages
 * four times slower (measured).
 */
function headAt(row: HeadRow, seq: number, id: string, bytes: number): MessageHead {
  return {
    seq,
    id,
    state: row.state,
    dueAt: row.due_at,
    deliveries: row.deliveries,
    leaseGeneration: row.lease_generation,
    bytes,
  };
}

/** The stored messages of a row: itself, or each message of a pack with its slice of the body. */
export function storedOf(row: FullPackRow): StoredMessage[] {
  if (row.n === 1 || row.pack === null) return [toStored(row)];
  const list = decodePackEntries(row.pack, row.body.byteLength);
  const bodies = packBodies(list, row.body);
  return list.map((entry, i) => storedAt(row, i, entry, bodies[i]!));
}

/** The message at `index` of a row: what the row's messages share, and the entry's own fields. */
function storedAt(row: FullRow, index: number, entry: PackEntry, body: Uint8Array): StoredMessage {
  const [id, sentAt, contentType, attributes, bytes] = entry;
  return {
    seq: row.seq + index,
    id,
    state: row.state,
    dueAt: row.due_at,
    deliveries: row.deliveries,
    leaseGeneration: row.lease_generation,
    sentAt,
    enqueuedAt: row.enqueued_at,
    bytes,
    contentType,
    attributes,
    body,
  };
}
