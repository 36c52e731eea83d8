import { statSync } from "node:fs";
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
import { CheckpointFlushError, newTruncationClaim, truncationClaim, WalCheckpointer } from "./wal-checkpointer.ts";
import { WalIndex } from "./wal-index.ts";
import { WalSync, type LostFlush, type SyncFile } from "./wal-sync.ts";
import { FileIdentity } from "./file-identity.ts";
import { compactIfMostlyFree, type CompactionBounds, type CompactionOutcome } from "./file-compaction.ts";
import { systemClock, type Clock } from "./clock.ts";
import { IdleWatch } from "./idle-watch.ts";

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
  /**
   * Told of a failed checkpoint: tried again after the next flush, unless a flush failed (then the
   * store takes no more writes; see `failed`); or of a failed compaction, tried again after the next
   * checkpoint or once more messages have left.
   */
  onBackgroundError?: (error: unknown, work?: BackgroundWork) => void;
  /**
   * With `full`: copies the log into the database file off the event loop (the WalCheckpointer's
   * thread; tests stand in for it to make a copy's flush fail).
   */
  copyLog?: (path: string) => Promise<void>;
  /**
   * With `full`: copies what is left of the log and truncates it, off the event loop (the
   * WalCheckpointer's thread); false when a reader kept it from finishing. `claim` goes to
   * WalCheckpointer.truncate (or is marked started by whatever stands in for it): a hook that drops
   * it leaves a send free to commit while the log is cut, waiting for its lock on the event loop.
   */
  truncateLog?: (path: string, claim: Int32Array) => Promise<boolean>;
  /** With `full`: when the file is rewritten without its free pages (compactionDefault). */
  compaction?: CompactionBounds;
  /** Time, for the quiet spell after which the log is truncated (the system clock). */
  clock?: Clock;
  /** With `full`: how long without a commit before the log is truncated (walTruncateIdleMsDefault). */
  walTruncateIdleMs?: number;
}

/** Which of the store's own work failed, for onBackgroundError: the checkpoint when not said. */
export type BackgroundWork = "checkpoint" | "compaction";

/**
 * Four times SQLite's default of 1,000 pages: with a longer log the hot index pages are copied
 * once for many commits instead of once for each few.
 */
const checkpointWalBytesDefault = 16 * 1024 * 1024;
/**
 * A log no commit has touched for this long is copied into the file and truncated to nothing. Below
 * the threshold no checkpoint starts it over, and a checkpoint leaves its file at the size it reached
 * (see journal_size_limit), so without this a queue quiet after a burst kept up to 16 MiB of log on
 * disk for as long as it stayed open, which a queue with a consumer does until celld stops.
 * 30 s: a queue in use commits far more often (a consumer's batch window is at most 60 s, and
 * its acks and the sends it waits for come within it), so it keeps its log at its working size;
 * an idle host gives every log back within a minute of its last commit. A queue that commits
 * once a minute pays one truncation a minute: a few frames copied and one flush of its file.
 */
export const walTruncateIdleMsDefault = 30_000;
/**
 * Copies on the checkpointer's thread, at most, before the short one here: each copies what the
 * writer added during the last. While a backlog was written as fast as possible here, one copy of
 * 16 MiB of log left under 1 MiB, so a second is rare.
 */
const backgroundCopiesMax = 4;
/**
 * A file is rewritten once as much of it is free as its log may keep (less is not worth a
 * rewrite), and while at most 1 MiB is in use (about 10 ms of VACUUM; see CompactionBounds).
 */
const compactionDefault: CompactionBounds = { freeBytesMin: checkpointWalBytesDefault, liveBytesMax: 1024 * 1024 };
/**
 * A look at the file's free space once this many messages have left since the last, and once a
 * backlog of at least compactLookAfterBacklogMessages is gone: a smaller one (at most 12.8 MB) cannot
 * have freed the 16 MiB a compaction waits for by default.
 */
const compactLookEveryMessages = 1000;
const compactLookAfterBacklogMessages = 100;
/** 100 rows of 9 parameters: well under SQLite's 32,766 and the size of the largest sendBatch. */
const insertRowsPerStatement = 100;

/**
 * One SQLite file per cell, WAL, one writer. Totals are kept in memory and rebuilt on open.
 *
 * Durability `full` does what synchronous=FULL does, off the event loop: SQLite commits with
 * synchronous=OFF, WalSync flushes the WAL with fdatasync on the thread pool, and `durable()`
 * says when a commit is on disk. SQLite's automatic checkpoints are off (with synchronous=OFF
 * they would not flush the database file before reusing the log); the store checkpoints itself,
 * with synchronous=FULL for the checkpoint, once checkpointWalBytes of log await copying: the bulk
 * on the WalCheckpointer's thread, then what was committed meanwhile here, briefly. A log left
 * alone for walTruncateIdleMs is copied and truncated to nothing on that thread.
 */
export class SqliteCellStore implements CellStore {
  private readonly db: Database.Database;
  /**
   * Runs its argument in one transaction. Made once: better-sqlite3 builds a new wrapper with
   * five variants for every db.transaction(fn), about 5 µs of every group (measured here).
   */
  private readonly runTransaction: Database.Transaction<(fn: () => unknown) => unknown>;
  private readonly walSync: WalSync | undefined;
  private walIndex: WalIndex | undefined;
  private readonly checkpointWalBytes: number;
  /** The copy running on the checkpointer's thread, if one is. */
  private backgroundCheckpoint: Promise<void> | undefined;
  /** Whether the checkpointer's thread has a connection to this file, to be closed before ours. */
  private checkpointerConnected = false;
  private readonly onBackgroundError: (error: unknown, work?: BackgroundWork) => void;
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
  /** Where the next row's seq starts: past every row's and every pack's held seqs. */
  private nextSeq: number;
  /** Packs in the store; with none, leases and acks take the paths for rows of one message. */
  private packs: number;
  /** The highest last id of any pack held since the store opened: a new pack's ids must be above it. */
  private packIdFloor: string;
  /** See legacyReceiptsUpToKey. */
  private readonly legacyReceiptsUpTo: number;

  /** Set for good by a failed flush of the database file in a checkpoint (see checkpointFailed). */
  private checkpointFlushFailure: CellError | undefined;
  /** Set for good by a transaction that found the file damaged (SQLITE_CORRUPT, SQLITE_NOTADB). */
  private damaged: CellError | undefined;
  /** The database file and its log as opened, to tell one deleted or moved since (see filesLost). */
  private files: FileIdentity | undefined;
  /** Set for good when they were found deleted or moved (with `full`, WalSync keeps it instead). */
  private filesGone: CellError | undefined;
  private readonly copyLog: (path: string) => Promise<void>;
  private readonly cutLog: (path: string, claim: Int32Array) => Promise<boolean>;
  private readonly compaction: CompactionBounds;
  /**
   * Whether to look at the file's free space after the next flush: at open (a file an older celld
   * left mostly free), after each checkpoint, and once messages have left (see afterFlush). The
   * look costs about 14 µs, too much for every flush of a queue that never holds many.
   */
  private compactionWanted = true;
  /** The most messages held (in any state) since the last look at the file's free space. */
  private heldPeak = 0;
  /** The last look found space to give back but too much in use, while a backlog was left. */
  private lookWhenEmptied = false;
  /** With `full`: starts the log's truncation once no commit has come for walTruncateIdleMs. */
  private readonly idleWatch: IdleWatch | undefined;
  /** A quiet spell ended while a checkpoint ran: the log is truncated when it ends, if still quiet. */
  private truncateAfterCheckpoint = false;
  /** The log's truncation on the checkpointer's thread, from its request to its answer (see writesHeld). */
  private truncating: Promise<void> | undefined;
  /** Whether the thread has started that truncation, or this thread cancelled it (truncationClaim). */
  private truncatingClaim: Int32Array | undefined;
  /** A group was let through before the thread started the truncation, which it then skips. */
  private truncationCancelled = false;

  constructor(
    private readonly path: string,
    options: SqliteStoreOptions = {},
  ) {
    this.copyLog = options.copyLog ?? ((file) => WalCheckpointer.get().checkpoint(file));
    this.cutLog = options.truncateLog ?? ((file, claim) => WalCheckpointer.get().truncate(file, claim));
    this.compaction = options.compaction ?? compactionDefault;
    try {
      this.db = new Database(path);
    } catch (error) {
      throw storageError(error, `opening ${path}`, { systemErrors: true });
    }
    try {
      // Before anything is written: a file of a newer layout is left exactly as it was found.
      const version = this.formatVersion();
      this.runTransaction = this.db.transaction((fn: () => unknown) => fn());
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
        this.walSync = new WalSync(
          `${path}-wal`,
          options.syncFile,
          () => this.afterFlush(),
          () => this.filesLost(),
        );
        this.idleWatch = new IdleWatch(options.clock ?? systemClock, options.walTruncateIdleMs ?? walTruncateIdleMsDefault, () =>
          this.truncateLogIfIdle(),
        );
      } else {
        this.db.pragma(`synchronous = ${durability.toUpperCase()}`);
      }
      this.db.pragma("foreign_keys = OFF");
      // 16 MiB of page cache, allocated only as pages are used: a large backlog keeps its index
      // interior pages hot without every small cell paying for it.
      this.db.pragma("cache_size = -16384");
      this.db.exec(schema);
      this.addMissingColumns();
      this.db.exec(schemaAfterColumns);
      if (version < cellFormatVersion) this.db.pragma(`user_version = ${cellFormatVersion}`);
      this.stmt = preparedOnFirstUse(this.db);
      this.counts = this.readTotals();
      this.nextSeq = (this.stmt.nextSeq.get() as { next: number }).next;
      const packStats = this.stmt.packStats.get() as { n: number; floor: string };
      this.packs = packStats.n;
      this.packIdFloor = packStats.floor;
      this.legacyReceiptsUpTo = this.readLegacyReceiptsUpTo();
      // The log exists from the first read of a WAL database on, and stays until the last close.
      this.files = FileIdentity.of([path, `${path}-wal`]);
      if (this.walSync !== undefined) {
        // Opening a WAL database leaves its log file in place; flush what recovery or the schema
        // wrote before anything is built on it.
        this.walSync.open();
        this.walIndex = WalIndex.open(`${path}-shm`);
        // A log with nothing to copy (a clean close deleted it; this open created it empty) needs
        // no checkpoint: it would copy nothing, and costs three pragmas on every reopen.
        if (this.walIndex.uncheckpointedBytes() > 0) this.checkpoint();
        // A log left by a crash keeps its size after that copy: given back once the queue is quiet.
        if (statSync(`${path}-wal`).size > 0) this.idleWatch?.wrote();
      }
    } catch (error) {
      // The open's checkpoint flushes both files: one that failed leaves the log as the record.
      if (isFlushFailure(error)) this.checkpointFlushFailure = flushFailedError(error);
      // A cell that failed to open keeps no descriptors: a disk that keeps failing would
      // otherwise leak a connection and two file handles at every attempt to reopen it.
      try {
        this.close();
      } catch {
        // The open's own error is the one to report.
      }
      throw this.checkpointFlushFailure ?? storageError(error, `opening ${path}`, { systemErrors: true });
    }
  }

  /**
   * Why the store takes no more writes, for good: a flush of its log (WalSync.failed) or of its
   * database file in a checkpoint failed. Undefined while every flush has worked.
   */
  get failed(): CellError | undefined {
    return this.walSync?.failed ?? this.checkpointFlushFailure ?? this.damaged ?? this.filesGone;
  }

  /**
   * The truncation's thread holds the log's write lock from its copy to its cut, and SQLite's busy
   * wait for that lock runs on the caller's thread: a send arriving then held the event loop, and
   * so every queue and request of the host, 10-27 ms (measured). Its group waits here instead.
   * Only once the thread has started it: until then it may wait there behind every other queue's
   * copies (holding a send 5 s in the test), and is cancelled instead, the queue being in use again.
   */
  writesHeld(): Promise<void> | undefined {
    const claim = this.truncatingClaim;
    if (claim === undefined) return undefined;
    const state = Atomics.compareExchange(claim, 0, truncationClaim.asked, truncationClaim.cancelled);
    if (state === truncationClaim.started) return this.truncating;
    if (state === truncationClaim.asked) this.truncationCancelled = true;
    return undefined;
  }

  durable(): Promise<void> | undefined {
    // Every write of a group is an INSERT, UPDATE or DELETE, and SQLite counts the rows they
    // change: an unchanged count means the group appended nothing to the log.
    const changes = (this.stmt.totalChanges.get() as { n: number }).n;
    const wrote = changes !== this.changesAtLastDurable;
    this.changesAtLastDurable = changes;
    if (wrote) this.idleWatch?.wrote();
    // A group that wrote nothing (a lease of an empty queue, the open's own) leaves it quiet: the
    // truncation it cancelled is asked for again, once the cancelled one has answered.
    else if (this.truncationCancelled) this.truncateLogIfIdle();
    this.truncationCancelled = false;
    if (this.walSync !== undefined) return this.walSync.durable(wrote);
    // Without a flush of its own the commit is the flush: the files are looked at after it.
    const lost = wrote ? this.filesLost() : undefined;
    if (lost === undefined) return undefined;
    this.filesGone ??= lost.stopped;
    return Promise.reject(lost.uncertain);
  }

  /**
   * After a flush (with `full`, WalSync asks; otherwise after each commit that wrote): whether the
   * database file or its log was deleted, moved or replaced while open. `rm cells/<queue>.sqlite*`
   * under a running celld left it answering sends into files no name led to any more, each one lost
   * at the next restart. The flush's calls are told they may not be on disk, and the store takes no
   * more writes (they could only go the same way) until it is opened anew. Two stats, a few
   * microseconds, once per flush rather than per call.
   */
  private filesLost(): LostFlush | undefined {
    const what = this.files?.changed();
    if (what === undefined) return undefined;
    const cause = Object.assign(new Error(what), { code: "ERR_CELL_FILES_MOVED" });
    const words = `its files were deleted or moved while the queue was open (${what})`;
    return {
      uncertain: new CellError(
        "ERR_STORAGE",
        `the queue's storage failed: ${words}; this call may not be on disk, and the queue takes no more writes until ` +
          `celld is restarted, which opens what is at ${this.path} then (the queue starts empty if nothing is)`,
        { cause },
      ),
      stopped: new CellError(
        "ERR_STORAGE",
        `the queue's storage failed: ${words}, so it takes no more writes until celld is restarted, which opens what is ` +
          `at ${this.path} then (the queue starts empty if nothing is)`,
        { cause },
      ),
    };
  }

  transaction<T>(fn: () => T): T {
    // Nothing more is written once a flush has failed (see `failed`).
    const failed = this.failed;
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
      throw this.writeFailed(error);
    }
  }

  /** A write that failed, as ERR_STORAGE; one that found the file damaged stops writes for good. */
  private writeFailed(error: unknown, doing?: string): unknown {
    const failure = storageError(error, doing);
    if (isDamage(error)) this.damaged ??= failure as CellError;
    return failure;
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
        this.packs -= 1;
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

  /** Counts out rows deleted in bulk; returns how many messages they held. */
  private removedRows(rows: ReadonlyArray<{ state: MessageState; n: number; bytes: number }>): number {
    let messages = 0;
    for (const row of rows) {
      this.bump(row.state, -row.n, -row.bytes);
      if (row.n > 1) this.packs -= 1;
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
    this.packs -= 1;
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
    this.idleWatch?.stop();
    // Its connection first (after any copy it is running), so that ours is the last.
    if (this.checkpointerConnected) WalCheckpointer.forgetIfRunning(this.path);
    this.checkpointerConnected = false;
    if (this.db.open) {
      if (this.failed !== undefined) {
        this.closeKeepingLog();
      } else {
        // The last connection's close checkpoints the log into the file and deletes it: with the
        // file flushed as well.
        if (this.walSync !== undefined) this.db.pragma("synchronous = FULL");
        this.db.close();
      }
    }
    this.walSync?.close();
    this.walIndex?.close();
    this.walIndex = undefined;
  }

  /**
   * Closes without the checkpoint the last connection's close runs. After a failed flush the log on
   * disk is what the next open recovers from, and what the OS holds of either file may not be what
   * the disk holds: a copy from it could write pages the disk never had into the file, and would
   * then delete the log. A read-only connection open across ours keeps ours from being the last,
   * and, being read-only, runs no checkpoint when it closes in turn. If it cannot open, the close
   * checkpoints with both files flushed, which deletes the log only if both flushes worked.
   */
  private closeKeepingLog(): void {
    let reader: Database.Database | undefined;
    try {
      reader = new Database(this.path, { readonly: true, fileMustExist: true });
      reader.prepare("SELECT count(*) FROM sqlite_master").get();
    } catch {
      reader?.close();
      reader = undefined;
      this.db.pragma("synchronous = FULL");
    }
    this.db.close();
    reader?.close();
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
   * Once the queue has been quiet for walTruncateIdleMs: its log's frames are copied into the file
   * (on the checkpointer's thread, as a checkpoint's are) and the log truncated to nothing. Not
   * while a checkpoint or a compaction's copy runs, which may hold the log's locks, but as soon as
   * it ends if no commit came meanwhile; a commit arms the next quiet spell instead. A close
   * meanwhile needs nothing of this: it copies the log and deletes it.
   */
  private truncateLogIfIdle(): void {
    this.truncateAfterCheckpoint = false;
    if (!this.db.open || this.failed !== undefined) return;
    if (this.backgroundCheckpoint !== undefined) {
      this.truncateAfterCheckpoint = true;
      return;
    }
    try {
      this.startCheckpoint(true);
    } catch (error) {
      // Reading the WAL-index failed: reported, not thrown, since a timer runs this.
      this.checkpointFailed(error);
    }
  }

  private uncheckpointedBytes(): number {
    return this.walIndex?.uncheckpointedBytes() ?? 0;
  }

  /** Messages still to be consumed: ready (delayed too), leased, or on their way to a dead-letter queue. */
  private backlogMessages(): number {
    return this.counts.ready + this.counts.leased + this.counts.moving;
  }

  /** After each successful flush, with no flush running and no transaction open. */
  private afterFlush(): void {
    this.checkpointIfLarge();
    // Pages are freed only as messages leave: look once many have, or once a backlog of some size
    // is gone altogether (the usual end of a drain, when the most is free and the least in use).
    const backlog = this.backlogMessages();
    const held = backlog + this.counts.dead;
    if (held > this.heldPeak) this.heldPeak = held;
    const left = this.heldPeak - held;
    const emptied = backlog === 0 && (left >= compactLookAfterBacklogMessages || this.lookWhenEmptied);
    if (left >= compactLookEveryMessages || emptied) this.compactionWanted = true;
    if (this.compactionWanted) this.compactIfMostlyFree();
  }

  /**
   * Gives the file's free pages back to the file system once they are many and what is left is
   * little (see compactIfMostlyFree): the rewrite on the event loop, the copy into the file, which
   * truncates it, on the checkpointer's thread. Not while a checkpoint runs: the rewrite starts one
   * of its own, whose copy to the log's end is what truncates the file; asked again when it ends.
   */
  private compactIfMostlyFree(): void {
    if (!this.db.open || this.db.inTransaction || this.backgroundCheckpoint !== undefined) return;
    if (this.failed !== undefined) return;
    this.compactionWanted = false;
    const backlog = this.backlogMessages();
    this.heldPeak = backlog + this.counts.dead;
    let outcome: CompactionOutcome;
    try {
      outcome = compactIfMostlyFree(this.db, this.stmt.pageCounts, this.compaction);
    } catch (error) {
      // Nothing is lost: a VACUUM that failed (a full disk) rolled back. Tried again after the next
      // checkpoint, or once more messages have left.
      this.onBackgroundError(this.writeFailed(error, "giving its file's free space back"), "compaction");
      return;
    }
    // What the backlog holds may be all that is in the way; with none left, it is dead letters.
    this.lookWhenEmptied = outcome === "much in use" && backlog > 0;
    if (outcome === "compacted") {
      // The rewrite is a commit to the log like a send's: the log is given back after it as well.
      this.idleWatch?.wrote();
      this.startCheckpoint();
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
    // After a failed flush the log must keep every frame for the next open: no copy starts it over.
    if (this.failed !== undefined) return;
    let size: number | undefined;
    try {
      size = this.walIndex?.uncheckpointedBytes();
    } catch (error) {
      this.checkpointFailed(error);
      return;
    }
    if (size === undefined || size < this.checkpointWalBytes) return;
    this.startCheckpoint();
  }

  /**
   * Copies the log on the checkpointer's thread, then starts it over here (see checkpointIfLarge).
   * `truncate`: the queue has been quiet (see truncateLogIfIdle), and the log is truncated too if it
   * still is once the copy is done; a commit meanwhile means the queue is in use again, and its log
   * is left at its working size until the next quiet spell.
   */
  private startCheckpoint(truncate = false): void {
    this.checkpointerConnected = true;
    const copied = truncate && this.uncheckpointedBytes() === 0 ? Promise.resolve() : this.copyInBackground();
    this.backgroundCheckpoint = copied
      .then(() => {
        // Closed meanwhile: its close copied the rest.
        if (!this.db.open || this.failed !== undefined) return;
        if (truncate && this.idleWatch?.idle === true) return this.truncateLog();
        this.checkpoint();
      })
      .catch((error: unknown) => this.checkpointFailed(error))
      .finally(() => {
        this.backgroundCheckpoint = undefined;
        this.compactionWanted = true;
        this.compactIfMostlyFree();
        if (this.truncateAfterCheckpoint && this.idleWatch?.idle === true) this.truncateLogIfIdle();
      });
  }

  /**
   * On the checkpointer's thread (see WalCheckpointer.truncate), with synchronous=FULL as every
   * checkpoint here: what the copy left (nothing, if no commit came meanwhile) is copied with both
   * files flushed, and SQLite cuts the log only once every frame is in the flushed file. The cut
   * itself is not flushed: a crash may leave the old frames, all in the file already, which the
   * next open copies again, harmlessly.
   */
  private async truncateLog(): Promise<void> {
    const claim = newTruncationClaim();
    this.truncatingClaim = claim;
    const cut = this.cutLog(this.path, claim);
    // Cleared before anything waiting on it runs, so that a group it held finds the way clear.
    const ended = (): void => {
      this.truncating = undefined;
      this.truncatingClaim = undefined;
    };
    this.truncating = cut.then(ended, ended);
    // A reader of the log kept it from finishing (none is expected): tried again a quiet spell later.
    if (!(await cut)) this.idleWatch?.retryLater();
  }

  /** Copies on the checkpointer's thread until little is left, or backgroundCopiesMax times. */
  private async copyInBackground(): Promise<void> {
    for (let i = 0; i < backgroundCopiesMax && this.db.open; i++) {
      await this.copyLog(this.path);
      if (!this.db.open || this.uncheckpointedBytes() < this.checkpointWalBytes / 16) return;
    }
  }

  /**
   * Reported, not thrown: it runs after a flush, where a throw would end the process.
   *
   * A copy that failed to write (a full disk) risks nothing: the log keeps every frame, SQLite's
   * mark of what was copied did not move, and the next flush tries again. A failed flush does: a
   * copy that stopped short of the log's end has moved the mark without flushing the file, and
   * Linux may have dropped the pages it could not write and report that only once, so a later
   * flush would succeed without them, and the next RESTART would start the log over those frames.
   * As with a failed flush of the log (WalSync), the store then takes no more writes and starts no
   * more checkpoints: the log keeps every frame, and the next open recovers from it, copying all of
   * it again.
   */
  private checkpointFailed(error: unknown): void {
    if (isFlushFailure(error)) {
      this.checkpointFlushFailure ??= flushFailedError(error);
      this.onBackgroundError(this.checkpointFlushFailure);
      return;
    }
    this.onBackgroundError(
      new CellError("ERR_STORAGE", `the queue's storage failed: checkpointing its log: ${(error as Error).message}`, {
        cause: error,
      }),
    );
  }

  /** A file from before a column was added gets it now (see addedColumns). */
  /** The file's layout (see cellFormatVersion); refused if this code does not know it. */
  private formatVersion(): number {
    const version = this.db.pragma("user_version", { simple: true }) as number;
    if (version > cellFormatVersion) {
      const cause = Object.assign(
        new Error(`its format is ${version}, and this celld reads formats up to ${cellFormatVersion}`),
        { code: "ERR_CELL_FORMAT_NEWER" },
      );
      throw new CellError(
        "ERR_STORAGE",
        `the queue's storage failed: opening ${this.path}: written by a newer celld (${cause.message}); ` +
          "nothing in it was changed: run that celld or a newer one on this data directory",
        { cause },
      );
    }
    return version;
  }

  /** Recorded at the first open by this code, so that receipts written since never count. */
  private readLegacyReceiptsUpTo(): number {
    const recorded = this.getMeta(legacyReceiptsUpToKey);
    if (recorded !== undefined) return Number(recorded);
    const latest = (this.stmt.latestReceipt.get() as { at: number }).at;
    this.setMeta(legacyReceiptsUpToKey, String(latest));
    return latest;
  }

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

/** A failed flush, of the database file by the checkpoint thread or of either file by SQLite. */
function isFlushFailure(error: unknown): boolean {
  return (
    error instanceof CheckpointFlushError ||
    (error instanceof Database.SqliteError && /^SQLITE_IOERR_(DIR_)?FSYNC$/.test(error.code))
  );
}

function flushFailedError(error: unknown): CellError {
  return new CellError(
    "ERR_STORAGE",
    `the queue's storage failed: flushing its database file to disk failed (${(error as Error).message}), so it takes ` +
      "no more writes until celld is restarted; what was answered before that failure is on disk",
    { cause: error },
  );
}

/**
 * SQLite's own failures as ERR_STORAGE (retryable), and with `systemErrors` the file system's too
 * (opening the log's handle, the WAL index); anything else unchanged. A transaction's `fn` may
 * throw errors of its own with codes, so only opening asks for the file system's.
 */
function storageError(error: unknown, doing?: string, options: { systemErrors?: boolean } = {}): unknown {
  const what = doing === undefined ? "" : ` ${doing}:`;
  if (error instanceof Database.SqliteError) {
    return new CellError("ERR_STORAGE", `the queue's storage failed:${what} ${error.message} (${error.code})`, { cause: error });
  }
  if (options.systemErrors === true && isSystemError(error)) {
    // Node's message starts with the code already: "ENOENT: no such file or directory, open '…'".
    return new CellError("ERR_STORAGE", `the queue's storage failed:${what} ${error.message}`, { cause: error });
  }
  return error;
}

/** SQLite found the file damaged, or not a database at all (extended codes included). */
function isDamage(error: unknown): boolean {
  return error instanceof Database.SqliteError && /^SQLITE_(CORRUPT|NOTADB)(_|$)/.test(error.code);
}

/** A failed system call, as Node reports one (fs, with an errno code and the call's name). */
function isSystemError(error: unknown): error is Error & { code: string; syscall: string } {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string" && typeof (error as { syscall?: unknown }).syscall === "string";
}
