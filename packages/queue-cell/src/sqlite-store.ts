import assert from "node:assert/strict";
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
  canPack,
  decodePackEntries,
  encodePack,
  expandPackList,
  indexInPack,
  messageBytes,
  packBodies,
  packMessagesMax,
  readPackList,
  type PackEntry,
} from "./message-pack.ts";
import {
  addedColumns,
  cellFormatVersion,
  insertRowsSql,
  legacyReceiptsUpToKey,
  limitedSql,
  newRowParams,
  schema,
  schemaAfterColumns,
  statementSql,
  type LeasableFields,
  type LimitedStatementName,
  type StatementName,
} from "./sqlite-sql.ts";
import {
  headsOf,
  packHead,
  parseLeasable,
  storedOf,
  toHead,
  toStored,
  type AckedPack,
  type FoundPack,
  type FullPackRow,
  type FullRow,
  type HeadPackRow,
  type HeadRow,
  type Leasable,
  type PackRow,
  type PackToLease,
  type RemovedRow,
} from "./sqlite-rows.ts";
import { SqliteFile, type SqliteStoreOptions } from "./sqlite-file.ts";

/** 100 rows of 9 parameters: well under SQLite's 32,766 and the size of the largest sendBatch. */
const insertRowsPerStatement = 100;

/**
 * One SQLite file per cell, WAL, one writer: the rows (inserts, leases, packs, acks, sweeps) and
 * the totals kept beside them in memory, rebuilt on open. The file itself, and what makes its
 * commits durable, is SqliteFile's.
 */
export class SqliteCellStore implements CellStore {
  private readonly file: SqliteFile;
  private readonly db: Database.Database;
  /**
   * Runs its argument in one transaction. Made once: better-sqlite3 builds a new wrapper with
   * five variants for every db.transaction(fn), about 5 µs of every group (measured here).
   */
  private readonly runTransaction: Database.Transaction<(fn: () => unknown) => unknown>;
  /** Multi-row INSERT statements by row count, prepared on first use. */
  private readonly insertStatements = new Map<number, Database.Statement>();
  /** Statements with a written-out LIMIT, by name and limit, prepared on first use. */
  private readonly limitedStatements = new Map<string, Database.Statement>();
  private counts: StoreTotals;
  /**
   * False once nextVisibleAt found no delayed ready row; set again by every write that may make
   * one (a row written ready with a visible time after its entry, or any move back to ready).
   * With a consumer waiting, the cell asks after every commit, and mostly nothing is delayed.
   */
  private mayHaveDelayed = true;
  /** undefined: unknown, recompute; null: no backlog. */
  private oldestBacklog: { seq: number; enqueuedAt: number } | null | undefined = undefined;
  private readonly stmt: Record<StatementName, Database.Statement>;
  /** Where the next row's seq starts: past every row's and every pack's held seqs. */
  private nextSeq: number;
  /** Packs in the store; with none, leases and acks take the paths for rows of one message. */
  private packs: number;
  /** The highest last id of any pack held since the store opened: a new pack's ids must be above it. */
  private packIdFloor: string;
  /** See legacyReceiptsUpToKey. */
  private readonly legacyReceiptsUpTo: number;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.file = new SqliteFile(path, options, () => ({
      backlog: this.counts.ready + this.counts.leased + this.counts.moving,
      dead: this.counts.dead,
    }));
    this.db = this.file.db;
    try {
      this.runTransaction = this.db.transaction((fn: () => unknown) => fn());
      this.db.exec(schema);
      this.addMissingColumns();
      this.db.exec(schemaAfterColumns);
      if (this.file.formatVersion < cellFormatVersion) this.db.pragma(`user_version = ${cellFormatVersion}`);
      this.stmt = preparedOnFirstUse(this.db);
      this.counts = this.readTotals();
      this.nextSeq = (this.stmt.nextSeq.get() as { next: number }).next;
      const packStats = this.stmt.packStats.get() as { n: number; floor: string };
      this.packs = packStats.n;
      this.packIdFloor = packStats.floor;
      this.legacyReceiptsUpTo = this.readLegacyReceiptsUpTo();
      this.file.start();
    } catch (error) {
      throw this.file.openFailed(error);
    }
  }

  /**
   * Why the store takes no more writes, for good (see SqliteFile.failed). Undefined while every
   * flush has worked.
   */
  get failed(): CellError | undefined {
    return this.file.failed;
  }

  writesHeld(): Promise<void> | undefined {
    return this.file.writesHeld();
  }

  durable(urgent = false): Promise<void> | undefined {
    return this.file.durable(urgent);
  }

  transaction<T>(fn: () => T): T {
    // Nothing more is written once a flush has failed (see `failed`).
    const failed = this.file.failed;
    if (failed !== undefined) throw failed;
    const saved = { ...this.counts };
    const savedOldest = this.oldestBacklog;
    const savedPacks = this.packs;
    try {
      return this.runTransaction.immediate(fn) as T;
    } catch (error) {
      // The rows rolled back; so must the totals kept beside them. (nextSeq and packIdFloor may
      // stay ahead: a seq or an id range left unused costs nothing.)
      this.counts = saved;
      this.oldestBacklog = savedOldest;
      this.packs = savedPacks;
      this.mayHaveDelayed = true;
      throw this.file.writeFailed(error);
    }
  }

  insert(rows: readonly NewMessage[], options: { skipKnownIds?: boolean } = {}): string[] {
    if (options.skipKnownIds !== true) return this.insertNew(rows);
    const inserted: string[] = [];
    for (const row of rows) {
      const bytes = messageBytes(row);
      const args = newRowParams(this.nextSeq++, row, bytes);
      // A dead-letter move is retried after a crash; the received table remembers ids that were
      // already taken in, even once they have been acked and deleted here, with the time they had
      // entered the queue they came from. The same id from a later entry is the message come round
      // a chain of dead-letter queues (a -> b, then b -> a once configs changed), not a repeat:
      // skipped as one, it was deleted from its source and never reached this queue.
      const from = row.movedFromEnqueuedAt ?? row.enqueuedAt;
      if (this.stmt.markReceived.run(row.id, from, this.legacyReceiptsUpTo).changes === 0) continue;
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

  /**
   * New rows, up to insertRowsPerStatement per statement: a send is one statement, not 100. A
   * send whose messages may share a pack is one row (see message-pack.ts).
   */
  private insertNew(rows: readonly NewMessage[]): string[] {
    for (let start = 0; start < rows.length; start += insertRowsPerStatement) {
      const chunk = rows.slice(start, start + insertRowsPerStatement);
      const firstSeq = this.nextSeq;
      // Visible later than it entered: delayed until then (the cell's clock never runs behind
      // an entry time, so a row due by its entry is never delayed).
      for (const row of chunk) if (row.dueAt > row.enqueuedAt) this.mayHaveDelayed = true;
      let bytesTotal = 0;
      if (canPack(chunk, this.packIdFloor)) {
        const first = chunk[0]!;
        const last = chunk[chunk.length - 1]!;
        const pack = encodePack(chunk);
        this.stmt.insertPack.run(firstSeq, first.id, first.dueAt, first.sentAt, first.enqueuedAt, pack.bytes, first.contentType, chunk.length, last.id, pack.entries, pack.body);
        bytesTotal = pack.bytes;
        this.packs += 1;
        this.packIdFloor = last.id;
      } else {
        const args: unknown[] = [];
        for (let i = 0; i < chunk.length; i++) {
          const row = chunk[i]!;
          const bytes = messageBytes(row);
          bytesTotal += bytes;
          args.push(...newRowParams(firstSeq + i, row, bytes));
        }
        this.insertStatement(chunk.length).run(...args);
      }
      this.nextSeq += chunk.length;
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
    const { picked, bodies } = this.packs === 0 ? parseLeasable(this.limited("leasable", limit).get(nowMs)) : this.leasableWithPacks(nowMs, limit);
    if (picked.length === 0) return [];
    this.stmt.leaseRows.run(expiresAtMs, owner, JSON.stringify(picked.map((row) => row[0])));
    let offset = 0;
    // As the UPDATE left each row. Each body is a view of the one blob, not a copy.
    const rows: LeasedRow[] = [];
    for (const row of picked) {
      const [seq, id, dueAt, deliveries, leaseGeneration, sentAt, enqueuedAt, bytes, contentType, attributes, bodyLength, , pack] = row;
      // A pack's messages, or the row's one message: [id, sentAt, contentType, attributes, bytes, bodyLength].
      const messages: readonly PackEntry[] = pack === null ? [[id, sentAt, contentType, attributes, bytes, bodyLength]] : expandPackList(pack);
      for (let i = 0; i < messages.length; i++) {
        const entry = messages[i]!;
        const body = new Uint8Array(bodies.buffer, bodies.byteOffset + offset, entry[5]);
        offset += entry[5];
        rows.push({
          seq: seq + i,
          id: entry[0],
          state: MessageState.leased,
          dueAt: expiresAtMs,
          deliveries: deliveries + 1,
          leaseGeneration: leaseGeneration + 1,
          sentAt: entry[1],
          enqueuedAt,
          bytes: entry[4],
          contentType: entry[2],
          attributes: entry[3],
          body,
          availableAt: dueAt,
          leaseExpiresAt: expiresAtMs,
        });
      }
    }
    if (offset !== bodies.byteLength) {
      throw new CellError("ERR_STORAGE", `the queue's storage failed: leased bodies came to ${bodies.byteLength} bytes, not ${offset}`);
    }
    this.counts.ready -= rows.length;
    this.counts.leased += rows.length;
    // One row's messages (a pack's, the common lease) are in seq order already.
    return picked.length === 1 ? rows : rows.sort((a, b) => a.seq - b.seq);
  }

  /**
   * What `leasable` reads, with packs in the store: the rows holding the first `limit` due
   * messages. A pack that would overfill the lease is unpacked first, so that the lease takes
   * exactly the messages it would if every message were a row of its own.
   */
  private leasableWithPacks(nowMs: number, limit: number): Leasable {
    for (;;) {
      const plan = JSON.parse((this.limited("leasablePlan", limit).get(nowMs) as { rows: string }).rows) as Array<[seq: number, n: number]>;
      const take: number[] = [];
      let count = 0;
      let unpacked = false;
      for (const [seq, n] of plan) {
        if (count + n <= limit) {
          take.push(seq);
          count += n;
          continue;
        }
        if (count < limit) unpacked = this.unpack(seq);
        break;
      }
      if (unpacked) continue;
      // One pack alone, the common case (a sendBatch as large as the consumer's batches): read
      // as a plain row, its list parsed once, rather than through leaseFetch's aggregates.
      if (take.length === 1 && count > 1) return this.packLeasable(take[0]!);
      return parseLeasable(this.stmt.leaseFetch.get(JSON.stringify(take)));
    }
  }

  private packLeasable(seq: number): Leasable {
    const row = this.stmt.packToLease.get(seq) as PackToLease;
    const list = decodePackEntries(row.pack, row.body.byteLength);
    const fields: LeasableFields = [
      row.seq,
      row.id,
      row.due_at,
      row.deliveries,
      row.lease_generation,
      row.sent_at,
      row.enqueued_at,
      row.bytes,
      row.content_type,
      null,
      row.body.byteLength,
      row.n,
      list,
    ];
    return { picked: [fields], bodies: row.body };
  }

  removeHeld(refs: ReadonlyArray<{ id: string; leaseGeneration: number }>): Map<string, number> {
    const removed = new Map<string, number>();
    if (refs.length === 0) return removed;
    const rest = this.packs === 0 ? refs : this.removeHeldPacks(refs, removed);
    if (rest.length === 0) return removed;
    const json = JSON.stringify(rest.map((ref) => [ref.id, ref.leaseGeneration]));
    for (const [id, generation, seq, state, bytes] of this.stmt.removeHeld.all(json) as RemovedRow[]) {
      this.leaveState({ seq, state, bytes });
      removed.set(id, generation);
    }
    return removed;
  }

  /**
   * The acks of messages in packs. A pack every message of which is acked with its generation
   * goes as one row. One acked in part is unpacked, and its acks are left, with those of rows of
   * one message, for the statement that deletes rows one by one; so are refs no pack holds.
   */
  private removeHeldPacks(
    refs: ReadonlyArray<{ id: string; leaseGeneration: number }>,
    removed: Map<string, number>,
  ): Array<{ id: string; leaseGeneration: number }> {
    const rest: Array<{ id: string; leaseGeneration: number }> = [];
    const packs = new Map<number, AckedPack>();
    // The pack last looked up: an ack's refs mostly come in a pack's order, one lookup a pack.
    let last: AckedPack | undefined;
    for (const ref of refs) {
      let pack = last !== undefined && ref.id >= last.row.id && ref.id <= last.row.last_id ? last : undefined;
      if (pack === undefined) {
        const found = this.packHolding(ref.id);
        if (found === undefined) {
          rest.push(ref);
          continue;
        }
        pack = packs.get(found.row.seq) ?? { ...found, held: new Map() };
        packs.set(found.row.seq, pack);
        last = pack;
      }
      const index = indexInPack(pack.list, ref.id);
      if (index < 0) rest.push(ref);
      else if (ref.leaseGeneration === pack.row.lease_generation && !pack.held.has(index)) pack.held.set(index, ref.id);
      // Else stale, or named twice: not acked, as the statement would not ack it.
    }
    for (const { row, list, held } of packs.values()) {
      const live = row.state === MessageState.ready || row.state === MessageState.leased;
      if (!live || held.size === 0) continue;
      if (held.size === list.length) {
        this.stmt.removePack.run(row.seq);
        this.packLeft();
        this.leaveState(row, row.n);
        for (const id of held.values()) removed.set(id, row.lease_generation);
        continue;
      }
      this.unpack(row.seq);
      for (const id of held.values()) rest.push({ id, leaseGeneration: row.lease_generation });
    }
    return rest;
  }

  head(id: string): MessageHead | undefined {
    const row = this.stmt.head.get(id) as HeadPackRow | undefined;
    if (row !== undefined) return row.n === 1 || row.pack === null ? toHead(row) : packHead(row, readPackList(row.pack)[0]!, 0);
    if (this.packs === 0) return undefined;
    const pack = this.packHolding(id);
    if (pack === undefined) return undefined;
    const index = indexInPack(pack.list, id);
    return index < 0 ? undefined : packHead(pack.row, pack.list[index]!, index);
  }

  /**
   * The one pack whose id range takes in `id` (packs' ranges never overlap), or undefined. The id
   * may still be none of its messages': a row of its own whose id falls in the range.
   */
  private packHolding(id: string): FoundPack | undefined {
    const row = this.stmt.packFor.get(id) as FoundPack["row"] | undefined;
    if (row === undefined || id > row.last_id) return undefined;
    return { row, list: readPackList(row.pack!) };
  }

  setState(head: MessageHead, state: MessageState, dueAtMs: number): void {
    this.onOneMessage(head.seq, (seq) => this.stmt.setState.run(state, dueAtMs, seq));
    this.leaveState(head);
    this.enterState(state, head.bytes);
  }

  unlease(head: MessageHead, dueAtMs: number): void {
    this.onOneMessage(head.seq, (seq) => this.stmt.unlease.run(dueAtMs, seq));
    this.leaveState(head);
    this.enterState(MessageState.ready, head.bytes);
  }

  resetToReady(head: MessageHead, dueAtMs: number): void {
    this.onOneMessage(head.seq, (seq) => this.stmt.resetToReady.run(dueAtMs, seq));
    this.leaveState(head);
    this.enterState(MessageState.ready, head.bytes);
    // A replayed row may be older than the cached oldest backlog row.
    this.oldestBacklog = undefined;
  }

  remove(head: MessageHead): void {
    this.onOneMessage(head.seq, (seq) => this.stmt.remove.run(seq));
    this.leaveState(head);
  }

  leasedBy(owner: number, limit: number): MessageHead[] {
    return (this.limited("leasedBy", limit).all(owner) as HeadPackRow[]).flatMap(headsOf).slice(0, limit);
  }

  expiredLeases(nowMs: number, limit: number): MessageHead[] {
    return (this.limited("expiredLeases", limit).all(nowMs) as HeadPackRow[]).flatMap(headsOf).slice(0, limit);
  }

  deadInRange(fromMs: number, toMs: number, limit: number): MessageHead[] {
    return (this.stmt.deadInRange.all({ from: fromMs, to: toMs, limit }) as HeadRow[]).map(toHead);
  }

  listByState(state: MessageState, afterSeq: number, limit: number): StoredMessage[] {
    // Dead and moving messages are never in packs: a message leaves its pack before it dies.
    if (state === MessageState.dead) return (this.stmt.listDead.all(afterSeq, limit) as FullRow[]).map(toStored);
    if (state === MessageState.moving) return (this.stmt.listMoving.all(afterSeq, limit) as FullRow[]).map(toStored);
    // A pack that starts before afterSeq may hold messages after it; rows wholly before it are
    // at most packMessagesMax - 1, so that many more rows still leave `limit` to return.
    const rows = this.stmt.listByState.all(state, afterSeq - (packMessagesMax - 1), limit + packMessagesMax - 1) as FullPackRow[];
    return rows
      .flatMap(storedOf)
      .filter((m) => m.seq > afterSeq)
      .slice(0, limit);
  }

  sweepEnqueuedBefore(cutoffMs: number, maxRows?: number): number {
    // Entry times rise with seq (the cell never lets them go back), so the expired rows are a
    // prefix: find its end with one index walk instead of scanning the table.
    const first = this.stmt.firstYoungerThan.get(cutoffMs) as { seq: number } | undefined;
    let end = first === undefined ? Number.MAX_SAFE_INTEGER : first.seq;
    if (maxRows !== undefined) {
      const past = this.stmt.seqAfterRows.get(end, maxRows) as { seq: number } | undefined;
      if (past !== undefined) end = past.seq;
    }
    return this.removedRows(this.stmt.sweepBefore.all(end) as Array<{ state: MessageState; n: number; bytes: number }>);
  }

  purge(states: readonly MessageState[], slice?: { rows: number; seqAtMost: number }): number {
    if (states.length === 0) return 0;
    const list = states.map((s) => Number(s)).join(", ");
    type Removed = Array<{ state: MessageState; n: number; bytes: number }>;
    if (slice === undefined) {
      return this.removedRows(this.db.prepare(`DELETE FROM messages WHERE state IN (${list}) RETURNING state, n, bytes`).all() as Removed);
    }
    return this.removedRows(
      this.db
        .prepare(
          `DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE state IN (${list}) AND seq <= ? LIMIT ?) RETURNING state, n, bytes`,
        )
        .all(slice.seqAtMost, slice.rows) as Removed,
    );
  }

  seqHighWater(): number {
    return this.nextSeq - 1;
  }

  /** A pack row left the store (deleted, or unpacked into rows of one message). */
  private packLeft(): void {
    this.packs -= 1;
    // The count is rebuilt from the file at open and kept beside the rows since: below zero, the
    // two disagree, and lease and ack paths that skip packs would skip real ones.
    assert(this.packs >= 0, "more packs left the store than it held");
  }

  /** Counts out rows deleted in bulk; returns how many messages they held. */
  private removedRows(rows: ReadonlyArray<{ state: MessageState; n: number; bytes: number }>): number {
    let messages = 0;
    for (const row of rows) {
      this.bump(row.state, -row.n, -row.bytes);
      if (row.n > 1) this.packLeft();
      messages += row.n;
    }
    if (rows.length > 0) this.oldestBacklog = undefined;
    return messages;
  }

  /**
   * Runs a change of one message by its seq. A message still in a pack has no row of its own:
   * the pack is unpacked, and the change run again.
   */
  private onOneMessage(seq: number, run: (seq: number) => Database.RunResult): void {
    if (run(seq).changes > 0 || this.packs === 0) return;
    const row = this.stmt.rowAtOrBefore.get(seq) as { seq: number; n: number } | undefined;
    if (row === undefined || row.n === 1 || seq >= row.seq + row.n) return;
    this.unpack(row.seq);
    run(seq);
  }

  /**
   * Replaces a pack with a row for each of its messages, at the seqs it held for them, each as
   * the pack stood (state, times, deliveries, lease). Returns false if no pack has that seq.
   */
  private unpack(seq: number): boolean {
    const row = this.stmt.packRow.get(seq) as PackRow | undefined;
    if (row === undefined) return false;
    const list = decodePackEntries(row.pack, row.body.byteLength);
    const bodies = packBodies(list, row.body);
    this.stmt.removePack.run(seq);
    for (let i = 0; i < list.length; i++) {
      const [id, sentAt, contentType, attributes, bytes] = list[i]!;
      this.stmt.insertUnpacked.run(seq + i, id, row.state, row.due_at, row.deliveries, row.lease_generation, row.lease_owner, sentAt, row.enqueued_at, bytes, contentType, attributes, bodies[i]!);
    }
    this.packLeft();
    return true;
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
    return this.dueCount(nowMs, count) >= count;
  }

  dueCount(nowMs: number, atMost: number): number {
    if (this.counts.ready === 0) return 0;
    // Packs count their messages, so the rows read can sum past atMost.
    return Math.min(atMost, (this.limited(this.packs === 0 ? "countDue" : "countDueMessages", atMost).get(nowMs) as { n: number }).n);
  }

  earliestReadyDueAt(): number | null {
    // No ready row at all: nothing to read. A consumer asks before each long poll, mostly of an
    // empty queue.
    if (this.counts.ready === 0) return null;
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
    this.file.close();
  }

  /** Recorded at the first open by this code, so that receipts written since never count. */
  private readLegacyReceiptsUpTo(): number {
    const recorded = this.getMeta(legacyReceiptsUpToKey);
    if (recorded !== undefined) return Number(recorded);
    const latest = (this.stmt.latestReceipt.get() as { at: number }).at;
    this.setMeta(legacyReceiptsUpToKey, String(latest));
    return latest;
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

  /** `count` messages (a pack's) leave the state; `bytes` is all of theirs. */
  private leaveState(head: Pick<MessageHead, "state" | "bytes" | "seq">, count = 1): void {
    this.bump(head.state, -count, -head.bytes);
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

/**
 * The store's statements, each prepared when first used: preparing all of them at open was about
 * 1 ms of every open (a third of it), most of them unused by a cell that opens, takes a few calls
 * and closes again under the bound on open cells. A statement becomes a plain property once
 * prepared, so later uses cost what they did.
 */
function preparedOnFirstUse(db: Database.Database): Record<StatementName, Database.Statement> {
  const statements = {} as Record<StatementName, Database.Statement>;
  for (const [name, sql] of Object.entries(statementSql) as Array<[StatementName, string]>) {
    Object.defineProperty(statements, name, {
      configurable: true,
      enumerable: true,
      get() {
        const statement = db.prepare(sql);
        // Rows as arrays: an ack's 100 rows then cost about 1 µs each less than as objects.
        if (name === "removeHeld") statement.raw(true);
        Object.defineProperty(statements, name, { value: statement, enumerable: true });
        return statement;
      },
    });
  }
  return statements;
}