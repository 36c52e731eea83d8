import { MessageState } from "./store.ts";

// The SQL of the SQLite store, apart from the code that runs it, so that a test can ask SQLite
// how it plans each statement (a missed index shows up only as slowness otherwise).

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

const fullColumns =
  "seq, id, state, due_at, deliveries, lease_generation, sent_at, enqueued_at, bytes, content_type, attributes, body";
const headColumns = "seq, id, state, due_at, deliveries, lease_generation, bytes";

/** Every prepared statement of the store, by the name the store uses. */
export const statementSql = {
  insertIgnore: `INSERT OR IGNORE INTO messages (id, state, due_at, sent_at, enqueued_at, bytes, content_type, attributes, body)
     VALUES (?, ${MessageState.ready}, ?, ?, ?, ?, ?, ?, ?)`,
  markReceived: "INSERT OR IGNORE INTO received (id, at) VALUES (?, ?)",
  // One statement for the whole lease: the rows' seqs go in as a JSON array.
  leaseRows: `UPDATE messages SET state = ${MessageState.leased}, due_at = ?,
       deliveries = deliveries + 1, lease_generation = lease_generation + 1, lease_owner = ?
     WHERE seq IN (SELECT value FROM json_each(?))`,
  // Acks in one statement: [[id, generation], ...] as JSON, each looked up by id. CROSS JOIN
  // fixes the order: left to itself, SQLite walks every leased row by the state index.
  removeHeld: `DELETE FROM messages WHERE seq IN (
       SELECT m.seq FROM json_each(?) AS j CROSS JOIN messages AS m ON m.id = j.value ->> 0
       WHERE m.lease_generation = j.value ->> 1 AND m.state IN (${MessageState.ready}, ${MessageState.leased})
     ) RETURNING id, lease_generation, seq, state, bytes`,
  head: `SELECT ${headColumns} FROM messages WHERE id = ?`,
  setState: "UPDATE messages SET state = ?, due_at = ? WHERE seq = ?",
  resetToReady: `UPDATE messages SET state = ${MessageState.ready}, due_at = ?, deliveries = 0,
       lease_generation = lease_generation + 1 WHERE seq = ?`,
  unlease: `UPDATE messages SET state = ${MessageState.ready}, due_at = ?, deliveries = max(deliveries - 1, 0),
       lease_generation = lease_generation + 1 WHERE seq = ?`,
  remove: "DELETE FROM messages WHERE seq = ?",
  // In the state index's own order (dead-letter time, then seq): ordering by seq alone sorted
  // every row left in the range for each slice of a replay, quadratic in the dead-letter set.
  deadInRange: `SELECT ${headColumns} FROM messages
     WHERE state = ${MessageState.dead} AND due_at >= @from AND due_at < @to
     ORDER BY due_at, seq LIMIT @limit`,
  listByState: `SELECT ${fullColumns} FROM messages WHERE state = ? AND seq > ? ORDER BY seq LIMIT ?`,
  // The state is written out, not bound: only then may SQLite use the partial index. INDEXED BY:
  // without statistics SQLite prefers the state index and sorts the whole state for each page.
  listDead: `SELECT ${fullColumns} FROM messages INDEXED BY messages_dead_by_seq
     WHERE state = ${MessageState.dead} AND seq > ? ORDER BY seq LIMIT ?`,
  listMoving: `SELECT ${fullColumns} FROM messages INDEXED BY messages_moving_by_seq
     WHERE state = ${MessageState.moving} AND seq > ? ORDER BY seq LIMIT ?`,
  firstYoungerThan: "SELECT seq FROM messages WHERE enqueued_at > ? ORDER BY seq LIMIT 1",
  sweepBefore: `DELETE FROM messages WHERE seq < ? RETURNING state, bytes`,
  countDelayed: `SELECT count(*) AS n FROM messages WHERE state = ${MessageState.ready} AND due_at > ?`,
  // NOT INDEXED: walk rows in seq order and stop at the first backlog row; through the state
  // index SQLite would collect every ready and leased row and sort them.
  oldestBacklog: `SELECT seq, enqueued_at FROM messages NOT INDEXED
     WHERE state IN (${MessageState.ready}, ${MessageState.leased}) ORDER BY seq LIMIT 1`,
  earliestReady: `SELECT due_at FROM messages WHERE state = ${MessageState.ready} ORDER BY due_at LIMIT 1`,
  nextVisible: `SELECT due_at FROM messages WHERE state = ${MessageState.ready} AND due_at > ? ORDER BY due_at LIMIT 1`,
  nextLeaseExpiry: `SELECT due_at FROM messages WHERE state = ${MessageState.leased} ORDER BY due_at LIMIT 1`,
  oldestEnqueued: "SELECT enqueued_at FROM messages ORDER BY seq LIMIT 1",
  newestEnqueued: "SELECT enqueued_at FROM messages ORDER BY seq DESC LIMIT 1",
  totals: "SELECT state, count(*) AS n, coalesce(sum(bytes), 0) AS bytes FROM messages GROUP BY state",
  getMeta: "SELECT value FROM meta WHERE key = ?",
  setMeta: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
  sweepReceived: "DELETE FROM received WHERE at <= ?",
  // Rows changed by this connection since it opened: whether a group wrote anything.
  totalChanges: "SELECT total_changes() AS n",
} as const;

export type StatementName = keyof typeof statementSql;

/**
 * Columns added after the first release, for a file made before them: each is added at open by
 * ALTER TABLE when missing (SQLite adds a column with a constant default without rewriting rows).
 */
export const addedColumns = [
  { table: "messages", column: "lease_owner", definition: "lease_owner INTEGER NOT NULL DEFAULT 0" },
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
    `SELECT json_group_array(json_array(seq, id, due_at, deliveries, lease_generation, sent_at, enqueued_at,
         bytes, content_type, attributes, length(body))) AS fields,
       CAST(group_concat(body, '') AS BLOB) AS bodies
     FROM (SELECT * FROM messages WHERE state = ${MessageState.ready} AND due_at <= ? ORDER BY due_at LIMIT ${sqlLimit(limit)})`,
  /** Due ready rows, counted up to `limit`: whether a waiting lease can be filled. */
  countDue: (limit: number) =>
    `SELECT count(*) AS n FROM (SELECT 1 FROM messages WHERE state = ${MessageState.ready} AND due_at <= ? LIMIT ${sqlLimit(limit)})`,
  /** Leased rows held by `owner`, through the state index (run once, at a host's start). */
  leasedBy: (limit: number) =>
    `SELECT ${headColumns} FROM messages WHERE state = ${MessageState.leased} AND lease_owner = ? LIMIT ${sqlLimit(limit)}`,
  expiredLeases: (limit: number) =>
    `SELECT ${headColumns} FROM messages WHERE state = ${MessageState.leased} AND due_at <= ?
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
];

/** A limit is written into the SQL text, so it must be a plain positive integer. */
function sqlLimit(limit: number): number {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`a statement's LIMIT must be a positive integer, not ${limit}`);
  return limit;
}

/** A multi-row INSERT of `rowCount` new ready rows, 8 parameters each. */
export function insertRowsSql(rowCount: number): string {
  const values = `(?, ${MessageState.ready}, ?, ?, ?, ?, ?, ?, ?)`;
  return `INSERT INTO messages (id, state, due_at, sent_at, enqueued_at, bytes, content_type, attributes, body)
     VALUES ${Array.from({ length: rowCount }, () => values).join(", ")}`;
}
