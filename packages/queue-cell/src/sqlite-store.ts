import Database from "better-sqlite3";
import { CellError } from "./errors.ts";
import {
  MessageState,
  type CellStore,
  type DueTimes,
  type MessageHead,
  type NewMessage,
  type LeasedRow,
  type StoreTotals,
  type StoredMessage,
} from "./store.ts";
import {
  addedColumns,
  insertRowsSql,
  limitedSql,
  schema,
  statementSql,
  type LeasableFields,
  type LimitedStatementName,
  type StatementName,
} from "./sqlite-sql.ts";
import { WalCheckpointer } from "./wal-checkpointer.ts";
import { WalIndex } from "./wal-index.ts";
import { WalSync, type SyncFile } from "./wal-sync.ts";

/**
 * `full` is the production setting: a commit has reached the disk before a send resolves. `off`
 * leaves flushing to the OS; simulations use it where they never crash the machine.
 */
export type Durability = "full" | "normal" | "off";

export interface SqliteStoreOptions {
  durability?: Durability;
  /** With `full`: how the WAL is flushed (fs.fdatasync; tests hold it to watch what waits). */
  syncFile?: SyncFile;
  /** With `full`: how much log not yet copied into the database triggers a checkpoint after a flush. */
  checkpointWalBytes?: number;
  /** Told of a failed checkpoint (it is tried again after the next flush). */
  onBackgroundError?: (error: unknown) => void;
}

/**
 * Four times SQLite's default of 1,000 pages: with a longer log the hot index pages are copied
 * once for many commits instead of once for each few.
 */
const checkpointWalBytesDefault = 16 * 1024 * 1024;
/**
 * Copies on the checkpointer's thread, at most, before the short one here: each copies what the
 * writer added during the last. While a backlog was written as fast as possible here, one copy of
 * 16 MiB of log left under 1 MiB, so a second is rare.
 */
const backgroundCopiesMax = 4;
/** 100 rows of 8 parameters: well under SQLite's 32,766 and the size of the largest sendBatch. */
const insertRowsPerStatement = 100;

interface FullRow {
  seq: number;
  id: string;
  state: MessageState;
  due_at: number;
  deliveries: number;
  lease_generation: number;
  sent_at: number;
  enqueued_at: number;
  bytes: number;
  content_type: string;
  attributes: string | null;
  body: Buffer;
}

interface HeadRow {
  seq: number;
  id: string;
  state: MessageState;
  due_at: number;
  deliveries: number;
  lease_generation: number;
  bytes: number;
}

/** A row removeHeld deleted, as its RETURNING clause lists the columns. */
type RemovedRow = [id: string, leaseGeneration: number, seq: number, state: MessageState, bytes: number];

function toStored(row: FullRow): StoredMessage {
  return {
    seq: row.seq,
    id: row.id,
    state: row.state,
    dueAt: row.due_at,
    deliveries: row.deliveries,
    leaseGeneration: row.lease_generation,
    sentAt: row.sent_at,
    enqueuedAt: row.enqueued_at,
    bytes: row.bytes,
    contentType: row.content_type,
    attributes: row.attributes,
    body: new Uint8Array(row.body.buffer, row.body.byteOffset, row.body.byteLength),
  };
}

function toHead(row: HeadRow): MessageHead {
  return {
    seq: row.seq,
    id: row.id,
    state: row.state,
    dueAt: row.due_at,
    deliveries: row.deliveries,
    leaseGeneration: row.lease_generation,
    bytes: row.bytes,
  };
}

function messageBytes(row: NewMessage): number {
  return row.body.byteLength + (row.attributes === null ? 0 : Buffer.byteLength(row.attributes));
}

/**
 * One SQLite file per cell, WAL, one writer. Totals are kept in memory and rebuilt on open.
 *
 * Durability `full` does what synchronous=FULL does, off the event loop: SQLite commits with
 * synchronous=OFF, WalSync flushes the WAL with fdatasync on the thread pool, and `durable()`
 * says when a commit is on disk. SQLite's automatic checkpoints are off (with synchronous=OFF
 * they would not flush the database file before reusing the log); the store checkpoints itself,
 * with synchronous=FULL for the checkpoint, once checkpointWalBytes of log await copying: the bulk
 * on the WalCheckpointer's thread, then what was committed meanwhile here, briefly.
 */
export class SqliteCellStore implements CellStore {
  private readonly db: Database.Database;
  private readonly walSync: WalSync | undefined;
  private walIndex: WalIndex | undefined;
  private readonly checkpointWalBytes: number;
  /** The copy running on the checkpointer's thread, if one is. */
  private backgroundCheckpoint: Promise<void> | undefined;
  /** Whether the checkpointer's thread has a connection to this file, to be closed before ours. */
  private checkpointerConnected = false;
  private readonly onBackgroundError: (error: unknown) => void;
  /** Multi-row INSERT statements by row count, prepared on first use. */
  private readonly insertStatements = new Map<number, Database.Statement>();
  /** Statements with a written-out LIMIT, by name and limit, prepared on first use. */
  private readonly limitedStatements = new Map<string, Database.Statement>();
  private counts: StoreTotals;
  /** SQLite's count of changed rows at the last durable(). */
  private changesAtLastDurable = 0;
  /**
   * False once nextVisibleAt found no delayed ready row; set again by every write that may make
   * one (a row written ready with a visible time after its entry, or any move back to ready).
   * With a consumer waiting, the cell asks after every commit, and mostly nothing is delayed.
   */
  private mayHaveDelayed = true;
  /** undefined: unknown, recompute; null: no backlog. */
  private oldestBacklog: { seq: number; enqueuedAt: number } | null | undefined = undefined;
  private readonly stmt: Record<StatementName, Database.Statement>;

  constructor(
    private readonly path: string,
    options: SqliteStoreOptions = {},
  ) {
    this.db = new Database(path);
    this.db.pragma("journal_mode = WAL");
    const durability = options.durability ?? "full";
    this.checkpointWalBytes = options.checkpointWalBytes ?? checkpointWalBytesDefault;
    this.onBackgroundError = options.onBackgroundError ?? (() => {});
    if (durability === "full") {
      this.db.pragma("synchronous = OFF");
      this.db.pragma("wal_autocheckpoint = 0");
      // After a checkpoint the next commits overwrite the log from its start rather than a
      // truncated log growing again: flushing an overwrite is about half the cost of an append
      // (no change of file size to journal), and the checkpoint skips truncating and syncing a
      // 16 MiB file (2 ms against 70-90 ms measured). A log that overshot is cut back to this.
      this.db.pragma(`journal_size_limit = ${this.checkpointWalBytes}`);
      this.walSync = new WalSync(`${path}-wal`, options.syncFile, () => this.checkpointIfLarge());
    } else {
      this.db.pragma(`synchronous = ${durability.toUpperCase()}`);
    }
    this.db.pragma("foreign_keys = OFF");
    // 16 MiB of page cache, allocated only as pages are used: a large backlog keeps its index
    // interior pages hot without every small cell paying for it.
    this.db.pragma("cache_size = -16384");
    this.db.exec(schema);
    this.addMissingColumns();
    const db = this.db;
    this.stmt = Object.fromEntries(
      Object.entries(statementSql).map(([name, sql]) => [name, db.prepare(sql)]),
    ) as Record<StatementName, Database.Statement>;
    // Rows as arrays: an ack's 100 rows then cost about 1 µs each less than as objects.
    this.stmt.removeHeld.raw(true);
    this.counts = this.readTotals();
    if (this.walSync !== undefined) {
      // Opening a WAL database leaves its log file in place; flush what recovery or the schema
      // wrote before anything is built on it.
      this.walSync.open();
      this.walIndex = WalIndex.open(`${path}-shm`);
      this.checkpoint();
    }
  }

  durable(): Promise<void> | undefined {
    if (this.walSync === undefined) return undefined;
    // Every write of a group is an INSERT, UPDATE or DELETE, and SQLite counts the rows they
    // change: an unchanged count means the group appended nothing to the log.
    const changes = (this.stmt.totalChanges.get() as { n: number }).n;
    const wrote = changes !== this.changesAtLastDurable;
    this.changesAtLastDurable = changes;
    return this.walSync.durable(wrote);
  }

  transaction<T>(fn: () => T): T {
    const saved = { ...this.counts };
    const savedOldest = this.oldestBacklog;
    try {
      return this.db.transaction(fn).immediate();
    } catch (error) {
      // The rows rolled back; so must the totals kept beside them.
      this.counts = saved;
      this.oldestBacklog = savedOldest;
      this.mayHaveDelayed = true;
      if (error instanceof Database.SqliteError) {
        throw new CellError("ERR_STORAGE", `the queue's storage failed: ${error.message} (${error.code})`, {
          cause: error,
        });
      }
      throw error;
    }
  }

  insert(rows: readonly NewMessage[], options: { skipKnownIds?: boolean } = {}): string[] {
    if (options.skipKnownIds !== true) return this.insertNew(rows);
    const inserted: string[] = [];
    for (const row of rows) {
      const bytes = messageBytes(row);
      const args = [row.id, row.dueAt, row.sentAt, row.enqueuedAt, bytes, row.contentType, row.attributes, row.body];
      // A dead-letter move is retried after a crash; the received table remembers ids that were
      // already taken in, even once they have been acked and deleted here.
      if (this.stmt.markReceived.run(row.id, row.enqueuedAt).changes === 0) continue;
      if (this.stmt.insertIgnore.run(...args).changes === 0) continue;
      if (row.dueAt > row.enqueuedAt) this.mayHaveDelayed = true;
      // The new row's seq is not read here; the oldest backlog row is looked up when asked.
      if (this.oldestBacklog === null) this.oldestBacklog = undefined;
      this.counts.ready += 1;
      this.counts.backlogBytes += bytes;
      inserted.push(row.id);
    }
    return inserted;
  }

  /** New rows, up to insertRowsPerStatement per statement: a send is one statement, not 100. */
  private insertNew(rows: readonly NewMessage[]): string[] {
    for (let start = 0; start < rows.length; start += insertRowsPerStatement) {
      const chunk = rows.slice(start, start + insertRowsPerStatement);
      const args: unknown[] = [];
      let bytesTotal = 0;
      for (const row of chunk) {
        const bytes = messageBytes(row);
        bytesTotal += bytes;
        // Visible later than it entered: delayed until then (the cell's clock never runs behind
        // an entry time, so a row due by its entry is never delayed).
        if (row.dueAt > row.enqueuedAt) this.mayHaveDelayed = true;
        args.push(row.id, row.dueAt, row.sentAt, row.enqueuedAt, bytes, row.contentType, row.attributes, row.body);
      }
      const { lastInsertRowid } = this.insertStatement(chunk.length).run(...args);
      // Rows of one statement take consecutive rowids: the table's largest plus one, in turn.
      const firstSeq = Number(lastInsertRowid) - chunk.length + 1;
      if (this.oldestBacklog === null) this.oldestBacklog = { seq: firstSeq, enqueuedAt: chunk[0]!.enqueuedAt };
      this.counts.ready += chunk.length;
      this.counts.backlogBytes += bytesTotal;
    }
    return rows.map((row) => row.id);
  }

  private limited(name: LimitedStatementName, limit: number): Database.Statement {
    const key = `${name} ${limit}`;
    let statement = this.limitedStatements.get(key);
    if (statement === undefined) {
      // Most callers pass a few fixed limits (batch sizes, slice sizes), but a consumer filling a
      // batch asks for what is left of it, anything from 1 to 99: past a few dozen statements the
      // map starts over rather than hold them all (preparing again costs some 20 µs, once).
      if (this.limitedStatements.size >= 32) this.limitedStatements.clear();
      statement = this.db.prepare(limitedSql[name](limit));
      this.limitedStatements.set(key, statement);
    }
    return statement;
  }

  private insertStatement(rowCount: number): Database.Statement {
    let statement = this.insertStatements.get(rowCount);
    if (statement === undefined) {
      statement = this.db.prepare(insertRowsSql(rowCount));
      this.insertStatements.set(rowCount, statement);
    }
    return statement;
  }

  lease(nowMs: number, limit: number, expiresAtMs: number, owner = 0): LeasedRow[] {
    const found = this.limited("leasable", limit).get(nowMs) as { fields: string; bodies: Buffer | null };
    const picked = JSON.parse(found.fields) as LeasableFields[];
    if (picked.length === 0) return [];
    this.stmt.leaseRows.run(expiresAtMs, owner, JSON.stringify(picked.map((row) => row[0])));
    const bodies = found.bodies ?? Buffer.alloc(0);
    let offset = 0;
    // As the UPDATE left each row. Each body is a view of the one blob, not a copy.
    const rows = picked.map((row): LeasedRow => {
      const [seq, id, dueAt, deliveries, leaseGeneration, sentAt, enqueuedAt, bytes, contentType, attributes, bodyLength] = row;
      const body = new Uint8Array(bodies.buffer, bodies.byteOffset + offset, bodyLength);
      offset += bodyLength;
      return {
        seq,
        id,
        state: MessageState.leased,
        dueAt: expiresAtMs,
        deliveries: deliveries + 1,
        leaseGeneration: leaseGeneration + 1,
        sentAt,
        enqueuedAt,
        bytes,
        contentType,
        attributes,
        body,
        availableAt: dueAt,
      };
    });
    if (offset !== bodies.byteLength) {
      throw new CellError("ERR_STORAGE", `the queue's storage failed: leased bodies came to ${bodies.byteLength} bytes, not ${offset}`);
    }
    this.counts.ready -= rows.length;
    this.counts.leased += rows.length;
    return rows.sort((a, b) => a.seq - b.seq);
  }

  removeHeld(refs: ReadonlyArray<{ id: string; leaseGeneration: number }>): Map<string, number> {
    const removed = new Map<string, number>();
    if (refs.length === 0) return removed;
    const json = JSON.stringify(refs.map((ref) => [ref.id, ref.leaseGeneration]));
    for (const [id, generation, seq, state, bytes] of this.stmt.removeHeld.all(json) as RemovedRow[]) {
      this.leaveState({ seq, state, bytes });
      removed.set(id, generation);
    }
    return removed;
  }

  head(id: string): MessageHead | undefined {
    const row = this.stmt.head.get(id) as HeadRow | undefined;
    return row === undefined ? undefined : toHead(row);
  }

  setState(head: MessageHead, state: MessageState, dueAtMs: number): void {
    this.stmt.setState.run(state, dueAtMs, head.seq);
    this.leaveState(head);
    this.enterState(state, head.bytes);
  }

  unlease(head: MessageHead, dueAtMs: number): void {
    this.stmt.unlease.run(dueAtMs, head.seq);
    this.leaveState(head);
    this.enterState(MessageState.ready, head.bytes);
  }

  resetToReady(head: MessageHead, dueAtMs: number): void {
    this.stmt.resetToReady.run(dueAtMs, head.seq);
    this.leaveState(head);
    this.enterState(MessageState.ready, head.bytes);
    // A replayed row may be older than the cached oldest backlog row.
    this.oldestBacklog = undefined;
  }

  remove(head: MessageHead): void {
    this.stmt.remove.run(head.seq);
    this.leaveState(head);
  }

  leasedBy(owner: number, limit: number): MessageHead[] {
    return (this.limited("leasedBy", limit).all(owner) as HeadRow[]).map(toHead);
  }

  expiredLeases(nowMs: number, limit: number): MessageHead[] {
    return (this.limited("expiredLeases", limit).all(nowMs) as HeadRow[]).map(toHead);
  }

  deadInRange(fromMs: number, toMs: number, limit: number): MessageHead[] {
    return (this.stmt.deadInRange.all({ from: fromMs, to: toMs, limit }) as HeadRow[]).map(toHead);
  }

  listByState(state: MessageState, afterSeq: number, limit: number): StoredMessage[] {
    const rows =
      state === MessageState.dead
        ? this.stmt.listDead.all(afterSeq, limit)
        : state === MessageState.moving
          ? this.stmt.listMoving.all(afterSeq, limit)
          : this.stmt.listByState.all(state, afterSeq, limit);
    return (rows as FullRow[]).map(toStored);
  }

  sweepEnqueuedBefore(cutoffMs: number): number {
    // Entry times rise with seq (the cell never lets them go back), so the expired rows are a
    // prefix: find its end with one index walk instead of scanning the table.
    const first = this.stmt.firstYoungerThan.get(cutoffMs) as { seq: number } | undefined;
    const end = first === undefined ? Number.MAX_SAFE_INTEGER : first.seq;
    const removed = this.stmt.sweepBefore.all(end) as Array<{ state: MessageState; bytes: number }>;
    for (const row of removed) this.leaveState({ state: row.state, bytes: row.bytes, seq: -1 });
    if (removed.length > 0) this.oldestBacklog = undefined;
    return removed.length;
  }

  purge(states: readonly MessageState[]): number {
    if (states.length === 0) return 0;
    const list = states.map((s) => Number(s)).join(", ");
    const removed = this.db
      .prepare(`DELETE FROM messages WHERE state IN (${list}) RETURNING state, bytes`)
      .all() as Array<{ state: MessageState; bytes: number }>;
    for (const row of removed) this.leaveState({ state: row.state, bytes: row.bytes, seq: -1 });
    if (removed.length > 0) this.oldestBacklog = undefined;
    return removed.length;
  }

  totals(): StoreTotals {
    return { ...this.counts };
  }

  countDelayed(nowMs: number): number {
    return (this.stmt.countDelayed.get(nowMs) as { n: number }).n;
  }

  oldestBacklogEnqueuedAt(): number | null {
    if (this.oldestBacklog === undefined) {
      const row = this.stmt.oldestBacklog.get() as { seq: number; enqueued_at: number } | undefined;
      this.oldestBacklog = row === undefined ? null : { seq: row.seq, enqueuedAt: row.enqueued_at };
    }
    return this.oldestBacklog === null ? null : this.oldestBacklog.enqueuedAt;
  }

  hasDue(nowMs: number, count: number): boolean {
    // Fewer ready rows in all, due or delayed: no need to read the index.
    if (this.counts.ready < count) return false;
    return (this.limited("countDue", count).get(nowMs) as { n: number }).n >= count;
  }

  earliestReadyDueAt(): number | null {
    const row = this.stmt.earliestReady.get() as { due_at: number } | undefined;
    return row === undefined ? null : row.due_at;
  }

  nextVisibleAt(nowMs: number): number | null {
    if (!this.mayHaveDelayed) return null;
    const visible = this.stmt.nextVisible.get(nowMs) as { due_at: number } | undefined;
    // None now, and time only moves on: none until a write makes one (see mayHaveDelayed).
    if (visible === undefined) this.mayHaveDelayed = false;
    return visible === undefined ? null : visible.due_at;
  }

  dueTimes(): DueTimes {
    const expiry = this.stmt.nextLeaseExpiry.get() as { due_at: number } | undefined;
    const oldest = this.stmt.oldestEnqueued.get() as { enqueued_at: number } | undefined;
    return {
      nextLeaseExpiryAt: expiry === undefined ? null : expiry.due_at,
      oldestEnqueuedAt: oldest === undefined ? null : oldest.enqueued_at,
    };
  }

  newestEnqueuedAt(): number | null {
    const row = this.stmt.newestEnqueued.get() as { enqueued_at: number } | undefined;
    return row === undefined ? null : row.enqueued_at;
  }

  getMeta(key: string): string | undefined {
    const row = this.stmt.getMeta.get(key) as { value: string } | undefined;
    return row?.value;
  }

  setMeta(key: string, value: string): void {
    this.stmt.setMeta.run(key, value);
  }

  sweepReceivedBefore(cutoffMs: number): number {
    return this.stmt.sweepReceived.run(cutoffMs).changes;
  }

  close(): void {
    // Its connection first (after any copy it is running), so that ours is the last.
    if (this.checkpointerConnected) WalCheckpointer.forgetIfRunning(this.path);
    this.checkpointerConnected = false;
    if (this.db.open) {
      // The last connection's close checkpoints the log into the file and deletes it: with the
      // file flushed as well.
      if (this.walSync !== undefined) this.db.pragma("synchronous = FULL");
      this.db.close();
    }
    this.walSync?.close();
    this.walIndex?.close();
    this.walIndex = undefined;
  }

  /**
   * Copies the log into the database file, under synchronous=FULL for this one statement: the
   * log is flushed before it is copied and the file after, so both are on disk before the next
   * commit writes over the log (with OFF neither would be). RESTART: the next commit starts the
   * log again from its beginning.
   */
  private checkpoint(): void {
    this.db.pragma("synchronous = FULL");
    try {
      this.db.pragma("wal_checkpoint(RESTART)");
    } finally {
      this.db.pragma("synchronous = OFF");
    }
  }

  /**
   * After a flush: once the log not yet copied passes the threshold, the checkpointer's thread
   * copies it, again while commits meanwhile added much (it copies faster than a writer adds), and
   * then this thread copies the little left with a RESTART, so the next commit starts the log
   * again from its beginning. The thread's copies alone would never catch up with the end of a
   * log under steady writes, and the log would only grow.
   */
  private checkpointIfLarge(): void {
    if (!this.db.open || this.db.inTransaction || this.backgroundCheckpoint !== undefined) return;
    let size: number | undefined;
    try {
      size = this.walIndex?.uncheckpointedBytes();
    } catch (error) {
      this.checkpointFailed(error);
      return;
    }
    if (size === undefined || size < this.checkpointWalBytes) return;
    this.checkpointerConnected = true;
    this.backgroundCheckpoint = this.copyInBackground()
      .then(() => {
        // Closed meanwhile: its close copied the rest.
        if (this.db.open) this.checkpoint();
      })
      .catch((error: unknown) => this.checkpointFailed(error))
      .finally(() => {
        this.backgroundCheckpoint = undefined;
      });
  }

  /** Copies on the checkpointer's thread until little is left, or backgroundCopiesMax times. */
  private async copyInBackground(): Promise<void> {
    for (let i = 0; i < backgroundCopiesMax && this.db.open; i++) {
      await WalCheckpointer.get().checkpoint(this.path);
      if (!this.db.open || (this.walIndex?.uncheckpointedBytes() ?? 0) < this.checkpointWalBytes / 16) return;
    }
  }

  /**
   * Reported, not thrown: it runs after a flush, where a throw would end the process. Nothing
   * committed is at risk: the log keeps it, and the next flush tries the checkpoint again.
   */
  private checkpointFailed(error: unknown): void {
    this.onBackgroundError(
      new CellError("ERR_STORAGE", `the queue's storage failed: checkpointing its log: ${(error as Error).message}`, {
        cause: error,
      }),
    );
  }

  /** A file from before a column was added gets it now (see addedColumns). */
  private addMissingColumns(): void {
    for (const { table, column, definition } of addedColumns) {
      const columns = this.db.prepare(`SELECT name FROM pragma_table_info('${table}')`).pluck().all() as string[];
      if (!columns.includes(column)) this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${definition}`);
    }
  }

  private readTotals(): StoreTotals {
    const totals: StoreTotals = { ready: 0, leased: 0, dead: 0, moving: 0, backlogBytes: 0 };
    for (const row of this.stmt.totals.all() as Array<{ state: MessageState; n: number; bytes: number }>) {
      if (row.state === MessageState.ready) totals.ready = row.n;
      else if (row.state === MessageState.leased) totals.leased = row.n;
      else if (row.state === MessageState.dead) totals.dead = row.n;
      else if (row.state === MessageState.moving) totals.moving = row.n;
      if (row.state === MessageState.ready || row.state === MessageState.leased) totals.backlogBytes += row.bytes;
    }
    return totals;
  }

  private enterState(state: MessageState, bytes: number): void {
    this.bump(state, 1, bytes);
    // Back to ready (a retry, an expiry, a replay), perhaps with a delay: not worth telling apart.
    if (state === MessageState.ready) this.mayHaveDelayed = true;
  }

  private leaveState(head: Pick<MessageHead, "state" | "bytes" | "seq">): void {
    this.bump(head.state, -1, -head.bytes);
    if (this.oldestBacklog != null && this.oldestBacklog.seq === head.seq) this.oldestBacklog = undefined;
  }

  private bump(state: MessageState, n: number, bytes: number): void {
    switch (state) {
      case MessageState.ready:
        this.counts.ready += n;
        this.counts.backlogBytes += bytes;
        break;
      case MessageState.leased:
        this.counts.leased += n;
        this.counts.backlogBytes += bytes;
        break;
      case MessageState.dead:
        this.counts.dead += n;
        break;
      case MessageState.moving:
        this.counts.moving += n;
        break;
    }
  }
}
