import assert from "node:assert/strict";
import type { StoredPackList } from "./message-pack.ts";
import { MessageState, type NewMessage } from "./store.ts";

// The SQL of the SQLite store, apart from the code that runs it, so that a test can ask SQLite
// how it plans each statement (a missed index shows up only as slowness otherwise).

/**
 * The layout of a cell's file, kept in SQLite's user_version. Raise it when a file this code
 * writes could be misread or damaged by a celld that predates the change (a new state, a column
 * that must be kept in step, rows moved elsewhere); columns older code may ignore go in
 * addedColumns and need no new number. A celld refuses a file with a higher number without
 * writing to it. Files made before the number was kept have 0, and are this layout: their
 * missing columns are added at open and the number written.
 */
export const cellFormatVersion = 1;

/**
 * The meta key of the latest receipt time that may have been written before dec8b29 (the file's
 * receipts when this code first opened it; -1 with none). Those receipts hold when their message
 * was taken in, not when it had entered the queue it came from, and dec8b29 kept the format
 * number: a dead-letter move that an older celld's crash cut between its two steps, finished by
 * this one, brings an entry time before that receipt's and is the same move repeated.
 */
export const legacyReceiptsUpToKey = "legacy_receipts_up_to";

export const schema = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  state INTEGER NOT NULL,
  due_at INTEGER NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 0,
  lease_generation INTEGER NOT NULL DEFAULT 0,
  lease_owner INTEGER NOT NULL DEFAULT 0,
  sent_at INTEGER NOT NULL,
  enqueued_at INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  attributes TEXT,
  -- A pack (see message-pack.ts) holds n > 1 messages: id is its first message's, last_id its
  -- last's, pack their own fields. A row of one message has n = 1 and neither.
  n INTEGER NOT NULL DEFAULT 1,
  last_id TEXT,
  pack TEXT,
  body BLOB NOT NULL
);
-- One index serves leasing (ready by visible time), lease expiry, dead-letter time ranges and
-- the next-due timer, because due_at means the time that matters in each state.
CREATE INDEX IF NOT EXISTS messages_by_state_due ON messages (state, due_at);
-- Pages of the dead-letter set and of rows moving to a dead-letter queue, in seq order without
-- sorting the whole state for each page. Partial: ready and leased rows, the hot path, never
-- enter them.
CREATE INDEX IF NOT EXISTS messages_dead_by_seq ON messages (seq) WHERE state = ${MessageState.dead};
CREATE INDEX IF NOT EXISTS messages_moving_by_seq ON messages (seq) WHERE state = ${MessageState.moving};
CREATE TABLE IF NOT EXISTS received (id TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID;
`;

/** Run after addedColumns, whose columns it names. */
export const schemaAfterColumns = `
-- The pack that may hold an id: the one with the greatest first id at or below it (packs' id
-- ranges never overlap). Partial: rows of one message never enter it.
CREATE INDEX IF NOT EXISTS messages_packs_by_id ON messages (id) WHERE n > 1;
`;

/** A new ready row: its columns, and one row's placeholders (its seq and a NewMessage's fields). */
const newRowColumns = "seq, id, state, due_at, sent_at, enqueued_at, bytes, content_type, attributes, body";
const newRowValues = `(?, ?, ${MessageState.ready}, ?, ?, ?, ?, ?, ?, ?)`;

/** A new row's parameters, in newRowColumns' order (its state is always ready). */
export function newRowParams(seq: number, row: NewMessage, bytes: number): unknown[] {
  return [seq, row.id, row.dueAt, row.sentAt, row.enqueuedAt, bytes, row.contentType, row.attributes, row.body];
}
const fullColumns =
  "seq, id, state, due_at, deliveries, lease_generation, sent_at, enqueued_at, bytes, content_type, attributes, body";
const headColumns = "seq, id, state, due_at, deliveries, lease_generation, bytes";
/** A head, and what it takes to read one message's head out of a pack. */
const headPackColumns = `${headColumns}, n, pack`;
/** A leasable row as one JSON array (see LeasableFields). */
const leasableJson = `json_array(seq, id, due_at, deliveries, lease_generation, sent_at, enqueued_at,
         bytes, content_type, attributes, length(body), n, json(pack))`;

/** Every prepared statement of the store, by the name the store uses. */
export const statementSql = {
  insertIgnore: `INSERT OR IGNORE INTO messages (${newRowColumns}) VALUES ${newRowValues}`,
  insertPack: `INSERT INTO messages (seq, id, state, due_at, sent_at, enqueued_at, bytes, content_type, n, last_id, pack, body)
     VALUES (?, ?, ${MessageState.ready}, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  /** One message of a pack being unpacked, as it stood in the pack. */
  insertUnpacked: `INSERT INTO messages (seq, id, state, due_at, deliveries, lease_generation, lease_owner, sent_at, enqueued_at,
       bytes, content_type, attributes, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  packRow: `SELECT seq, state, due_at, deliveries, lease_generation, lease_owner, enqueued_at, n, pack, body
     FROM messages WHERE seq = ? AND n > 1`,
  removePack: "DELETE FROM messages WHERE seq = ? AND n > 1",
  /** The one pack that may hold this id (see messages_packs_by_id). */
  packFor: `SELECT ${headPackColumns}, last_id FROM messages INDEXED BY messages_packs_by_id
     WHERE n > 1 AND id <= ? ORDER BY id DESC LIMIT 1`,
  /** The row holding this seq: the row with it, or the pack before it if the pack reaches it. */
  rowAtOrBefore: "SELECT seq, n FROM messages WHERE seq <= ? ORDER BY seq DESC LIMIT 1",
  /**
   * The seq after every row's, packs' held seqs included: where the next insert starts. The last
   * row's is enough: a pack's held seqs come before any later row's.
   */
  nextSeq: "SELECT coalesce((SELECT seq + n FROM messages ORDER BY seq DESC LIMIT 1), 1) AS next",
  /**
   * How many packs there are, and the highest last id of them: a new pack's ids must all be above
   * it (see canPack). One walk of the packs' index, at open.
   */
  packStats: `SELECT count(*) AS n, coalesce(max(last_id), '') AS floor
     FROM messages INDEXED BY messages_packs_by_id WHERE n > 1`,
  /**
   * Changes a row unless the id was taken in from that very entry (see CellStore.insert), or is
   * held by a receipt from before receipts kept entry times (its time then is when it was taken
   * in, at or after its entry) that the new entry does not come after (the third parameter is the
   * latest such receipt's time; see legacyReceiptsUpToKey).
   */
  markReceived: `INSERT INTO received (id, at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at
     WHERE at <> excluded.at AND NOT (excluded.at < at AND at <= ?)`,
  // One statement for the whole lease: the rows' seqs go in as a JSON array.
  leaseRows: `UPDATE messages SET state = ${MessageState.leased}, due_at = ?,
       deliveries = deliveries + 1, lease_generation = lease_generation + 1, lease_owner = ?
     WHERE seq IN (SELECT value FROM json_each(?))`,
  // Acks in one statement: [[id, generation], ...] as JSON, each looked up by id. CROSS JOIN
  // fixes the order: left to itself, SQLite walks every leased row by the state index.
  removeHeld: `DELETE FROM messages WHERE seq IN (
       SELECT m.seq FROM json_each(?) AS j CROSS JOIN messages AS m ON m.id = j.value ->> 0
       WHERE m.lease_generation = j.value ->> 1 AND m.state IN (${MessageState.ready}, ${MessageState.leased}) AND m.n = 1
     ) RETURNING id, lease_generation, seq, state, bytes`,
  /** The rows limitedSql.leasablePlan chose (a JSON list of seqs), as limitedSql.leasable reads rows. */
  leaseFetch: `SELECT json_group_array(${leasableJson}) AS fields, CAST(group_concat(body, '') AS BLOB) AS bodies
     FROM (SELECT * FROM messages WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq)`,
  /** One pack that a lease takes alone, read without the aggregates of leaseFetch. */
  packToLease: `SELECT seq, id, due_at, deliveries, lease_generation, sent_at, enqueued_at, bytes, content_type, n, pack, body
     FROM messages WHERE seq = ? AND n > 1`,
  head: `SELECT ${headPackColumns} FROM messages WHERE id = ?`,
  // The changes of one message: never applied to a pack (n = 1), which is unpacked first.
  setState: "UPDATE messages SET state = ?, due_at = ? WHERE seq = ? AND n = 1",
  resetToReady: `UPDATE messages SET state = ${MessageState.ready}, due_at = ?, deliveries = 0,
       lease_generation = lease_generation + 1 WHERE seq = ? AND n = 1`,
  unlease: `UPDATE messages SET state = ${MessageState.ready}, due_at = ?, deliveries = max(deliveries - 1, 0),
       lease_generation = lease_generation + 1 WHERE seq = ? AND n = 1`,
  remove: "DELETE FROM messages WHERE seq = ? AND n = 1",
  // In the state index's own order (dead-letter time, then seq): ordering by seq alone sorted
  // every row left in the range for each slice of a replay, quadratic in the dead-letter set.
  deadInRange: `SELECT ${headColumns} FROM messages
     WHERE state = ${MessageState.dead} AND due_at >= @from AND due_at < @to
     ORDER BY due_at, seq LIMIT @limit`,
  listByState: `SELECT ${fullColumns}, n, pack FROM messages WHERE state = ? AND seq > ? ORDER BY seq LIMIT ?`,
  // The state is written out, not bound: only then may SQLite use the partial index. INDEXED BY:
  // without statistics SQLite prefers the state index and sorts the whole state for each page.
  listDead: `SELECT ${fullColumns} FROM messages INDEXED BY messages_dead_by_seq
     WHERE state = ${MessageState.dead} AND seq > ? ORDER BY seq LIMIT ?`,
  listMoving: `SELECT ${fullColumns} FROM messages INDEXED BY messages_moving_by_seq
     WHERE state = ${MessageState.moving} AND seq > ? ORDER BY seq LIMIT ?`,
  firstYoungerThan: "SELECT seq FROM messages WHERE enqueued_at > ? ORDER BY seq LIMIT 1",
  sweepBefore: `DELETE FROM messages WHERE seq < ? RETURNING state, n, bytes`,
  /** The seq of the row after the first N below a bound: where a sweep of N rows ends. */
  seqAfterRows: "SELECT seq FROM messages WHERE seq < ? ORDER BY seq LIMIT 1 OFFSET ?",
  countDelayed: `SELECT coalesce(sum(n), 0) AS n FROM messages WHERE state = ${MessageState.ready} AND due_at > ?`,
  // NOT INDEXED: walk rows in seq order and stop at the first backlog row; through the state
  // index SQLite would collect every ready and leased row and sort them.
  oldestBacklog: `SELECT seq, enqueued_at FROM messages NOT INDEXED
     WHERE state IN (${MessageState.ready}, ${MessageState.leased}) ORDER BY seq LIMIT 1`,
  earliestReady: `SELECT due_at FROM messages WHERE state = ${MessageState.ready} ORDER BY due_at LIMIT 1`,
  nextVisible: `SELECT due_at FROM messages WHERE state = ${MessageState.ready} AND due_at > ? ORDER BY due_at LIMIT 1`,
  nextLeaseExpiry: `SELECT due_at FROM messages WHERE state = ${MessageState.leased} ORDER BY due_at LIMIT 1`,
  oldestEnqueued: "SELECT enqueued_at FROM messages ORDER BY seq LIMIT 1",
  newestEnqueued: "SELECT enqueued_at FROM messages ORDER BY seq DESC LIMIT 1",
  totals: "SELECT state, coalesce(sum(n), 0) AS n, coalesce(sum(bytes), 0) AS bytes FROM messages GROUP BY state",
  getMeta: "SELECT value FROM meta WHERE key = ?",
  setMeta: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
  sweepReceived: "DELETE FROM received WHERE at <= ?",
  latestReceipt: "SELECT coalesce(max(at), -1) AS at FROM received",
  // Rows changed by this connection since it opened: whether a group wrote anything.
  totalChanges: "SELECT total_changes() AS n",
  /** The file's page size, pages and free pages, for its compaction (file-compaction.ts). */
  pageCounts: "SELECT page_size, page_count, freelist_count FROM pragma_page_size, pragma_page_count, pragma_freelist_count",
} as const;

export type StatementName = keyof typeof statementSql;

/**
 * Columns added after the first release, for a file made before them: each is added at open by
 * ALTER TABLE when missing (SQLite adds a column with a constant default without rewriting rows).
 */
export const addedColumns = [
  { table: "messages", column: "lease_owner", definition: "lease_owner INTEGER NOT NULL DEFAULT 0" },
  { table: "messages", column: "n", definition: "n INTEGER NOT NULL DEFAULT 1" },
  { table: "messages", column: "last_id", definition: "last_id TEXT" },
  { table: "messages", column: "pack", definition: "pack TEXT" },
] as const;

/**
 * The SQL of statements whose LIMIT is written out rather than bound, one prepared statement per
 * limit. With a bound LIMIT, SQLite 3.53 runs a statement as if preparing it again each time
 * (it seems to read the value while planning): measured, that tripled the cost of leasing one
 * message (23 µs against 6), and `SELECT 1 LIMIT ?` cost 4.7 µs against 1.0 for `LIMIT 1`.
 */
export const limitedSql = {
  /**
   * Due ready rows, oldest first, as ONE row: the rows' fields as a JSON array of arrays (see
   * LeasableFields) and their bodies end to end in one blob. Returned row by row, better-sqlite3
   * builds an object, strings and a Buffer for each: 7-9 µs a message against under 2 this way.
   * Both aggregates read the same rows in one pass, so the nth entry's body is the nth slice.
   * CAST: group_concat joins the blobs as text, byte for byte in a UTF-8 database (as this one
   * is, by default), and the cast takes those bytes back as a blob, unchanged.
   */
  leasable: (limit: number) =>
    `SELECT json_group_array(${leasableJson}) AS fields, CAST(group_concat(body, '') AS BLOB) AS bodies
     FROM (SELECT * FROM messages WHERE state = ${MessageState.ready} AND due_at <= ? ORDER BY due_at LIMIT ${sqlLimit(limit)})`,
  /**
   * With packs in the store, a lease first reads which rows to take ([seq, n] each, in the order
   * leasable reads them), so that it reads the fields and bodies of no row it does not take.
   */
  leasablePlan: (limit: number) =>
    `SELECT json_group_array(json_array(seq, n)) AS rows
     FROM (SELECT seq, n FROM messages WHERE state = ${MessageState.ready} AND due_at <= ? ORDER BY due_at LIMIT ${sqlLimit(limit)})`,
  /** Due ready rows, counted up to `limit`: whether a waiting lease can be filled (no packs). */
  countDue: (limit: number) =>
    `SELECT count(*) AS n FROM (SELECT 1 FROM messages WHERE state = ${MessageState.ready} AND due_at <= ? LIMIT ${sqlLimit(limit)})`,
  /** The same with packs in the store, counting their messages: it reads each row, not only the index. */
  countDueMessages: (limit: number) =>
    `SELECT coalesce(sum(n), 0) AS n FROM (SELECT n FROM messages WHERE state = ${MessageState.ready} AND due_at <= ? LIMIT ${sqlLimit(limit)})`,
  /** Leased rows held by `owner`, through the state index (run once, at a host's start). */
  leasedBy: (limit: number) =>
    `SELECT ${headPackColumns} FROM messages WHERE state = ${MessageState.leased} AND lease_owner = ? LIMIT ${sqlLimit(limit)}`,
  expiredLeases: (limit: number) =>
    `SELECT ${headPackColumns} FROM messages WHERE state = ${MessageState.leased} AND due_at <= ?
     ORDER BY due_at LIMIT ${sqlLimit(limit)}`,
} as const;

export type LimitedStatementName = keyof typeof limitedSql;

/** One leasable row's fields, in the order `limitedSql.leasable` writes them. */
export type LeasableFields = [
  seq: number,
  id: string,
  dueAt: number,
  deliveries: number,
  leaseGeneration: number,
  sentAt: number,
  enqueuedAt: number,
  bytes: number,
  contentType: string,
  attributes: string | null,
  bodyLength: number,
  /** Messages in the row: more than one for a pack, whose list follows. */
  n: number,
  pack: StoredPackList | null,
];

/**
 * A limit is written into the SQL text, so it must be a plain positive integer. Every caller
 * passes one of its own (a slice size, a checked lease size): anything else is a bug, asserted.
 */
function sqlLimit(limit: number): number {
  assert(Number.isSafeInteger(limit) && limit >= 1, `a statement's LIMIT must be a positive integer, not ${limit}`);
  return limit;
}

/** A multi-row INSERT of `rowCount` new ready rows, 9 parameters each (the seq given). */
export function insertRowsSql(rowCount: number): string {
  return `INSERT INTO messages (${newRowColumns}) VALUES ${Array.from({ length: rowCount }, () => newRowValues).join(", ")}`;
}
