import { statSync } from "node:fs";
import Database from "better-sqlite3";
import { CellError } from "./errors.ts";
import { cellFormatVersion, statementSql } from "./sqlite-sql.ts";
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

/**
 * What a store knows of its messages that the file's upkeep weighs: whether a look at its free
 * space can pay (see afterFlush).
 */
export interface HeldMessages {
  /** Still to be consumed: ready (delayed too), leased, or on their way to a dead-letter queue. */
  backlog: number;
  /** In the queue's own dead-letter set. */
  dead: number;
}

/**
 * The SQLite file a store writes through, and what keeps it durable: the connection and its
 * pragmas, the log's flush (WalSync), checkpoints, the idle log's truncation, compaction, the
 * check that the files are still where they were opened, the latches that stop writes after a
 * failure, and the close. It knows nothing of rows: SqliteCellStore keeps them.
 *
 * Durability `full` does what synchronous=FULL does, off the event loop: SQLite commits with
 * synchronous=OFF, WalSync flushes the WAL with fdatasync on the thread pool, and `durable()`
 * says when a commit is on disk. SQLite's automatic checkpoints are off (with synchronous=OFF
 * they would not flush the database file before reusing the log); the file checkpoints itself,
 * with synchronous=FULL for the checkpoint, once checkpointWalBytes of log await copying: the bulk
 * on the WalCheckpointer's thread, then what was committed meanwhile here, briefly. A log left
 * alone for walTruncateIdleMs is copied and truncated to nothing on that thread.
 */
export class SqliteFile {
  readonly db: Database.Database;
  /** The file's layout as found at open (see cellFormatVersion); never newer than this code's. */
  readonly formatVersion: number;
  private readonly walSync: WalSync | undefined;
  private walIndex: WalIndex | undefined;
  private readonly checkpointWalBytes: number;
  /** The copy running on the checkpointer's thread, if one is. */
  private backgroundCheckpoint: Promise<void> | undefined;
  /** Whether the checkpointer's thread has a connection to this file, to be closed before ours. */
  private checkpointerConnected = false;
  private readonly onBackgroundError: (error: unknown, work?: BackgroundWork) => void;
  /** SQLite's count of changed rows at the last durable(). */
  private changesAtLastDurable = 0;
  /** `SELECT total_changes()` and the page counts, prepared on first use. */
  private totalChangesStatement: Database.Statement | undefined;
  private pageCountsStatement: Database.Statement | undefined;

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

  /**
   * Opens the file and sets its connection up; the store then creates or updates its tables, and
   * calls start(). `held` is read after flushes, once started.
   */
  constructor(
    readonly path: string,
    options: SqliteStoreOptions,
    private readonly held: () => HeldMessages,
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
      this.formatVersion = checkedFormatVersion(this.db, path);
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
    } catch (error) {
      throw this.openFailed(error);
    }
  }

  /**
   * Once the store's tables are in place: the files' identity is taken, and with `full` what
   * recovery or the tables' creation wrote is flushed, and a log a crash left is copied.
   */
  start(): void {
    // The log exists from the first read of a WAL database on, and stays until the last close.
    this.files = FileIdentity.of([this.path, `${this.path}-wal`]);
    if (this.walSync === undefined) return;
    // Opening a WAL database leaves its log file in place; flush what recovery or the schema
    // wrote before anything is built on it.
    this.walSync.open();
    this.walIndex = WalIndex.open(`${this.path}-shm`);
    // A log with nothing to copy (a clean close deleted it; this open created it empty) needs
    // no checkpoint: it would copy nothing, and costs three pragmas on every reopen.
    if (this.walIndex.uncheckpointedBytes() > 0) this.checkpoint();
    // A log left by a crash keeps its size after that copy: given back once the queue is quiet.
    if (statSync(`${this.path}-wal`).size > 0) this.idleWatch?.wrote();
  }

  /**
   * An open that failed, from the constructor to start(): the file is closed, and the error to
   * throw returned. A cell that failed to open keeps no descriptors: a disk that keeps failing
   * would otherwise leak a connection and two file handles at every attempt to reopen it.
   */
  openFailed(error: unknown): unknown {
    // The open's checkpoint flushes both files: one that failed leaves the log as the record.
    if (isFlushFailure(error)) this.checkpointFlushFailure = flushFailedError(error);
    try {
      this.close();
    } catch {
      // The open's own error is the one to report.
    }
    return this.checkpointFlushFailure ?? storageError(error, `opening ${this.path}`, { systemErrors: true });
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

  durable(urgent = false): Promise<void> | undefined {
    // Every write of a group is an INSERT, UPDATE or DELETE, and SQLite counts the rows they
    // change: an unchanged count means the group appended nothing to the log.
    this.totalChangesStatement ??= this.db.prepare(statementSql.totalChanges);
    const changes = (this.totalChangesStatement.get() as { n: number }).n;
    const wrote = changes !== this.changesAtLastDurable;
    this.changesAtLastDurable = changes;
    if (wrote) this.idleWatch?.wrote();
    // A group that wrote nothing (a lease of an empty queue, the open's own) leaves it quiet: the
    // truncation it cancelled is asked for again, once the cancelled one has answered.
    else if (this.truncationCancelled) this.truncateLogIfIdle();
    this.truncationCancelled = false;
    if (this.walSync !== undefined) return this.walSync.durable(wrote, urgent);
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

  /** A write that failed, as ERR_STORAGE; one that found the file damaged stops writes for good. */
  writeFailed(error: unknown, doing?: string): unknown {
    const failure = storageError(error, doing);
    if (isDamage(error)) this.damaged ??= failure as CellError;
    return failure;
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

  /** After each successful flush, with no flush running and no transaction open. */
  private afterFlush(): void {
    this.checkpointIfLarge();
    // Pages are freed only as messages leave: look once many have, or once a backlog of some size
    // is gone altogether (the usual end of a drain, when the most is free and the least in use).
    const { backlog, dead } = this.held();
    const held = backlog + dead;
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
    const { backlog, dead } = this.held();
    this.heldPeak = backlog + dead;
    let outcome: CompactionOutcome;
    try {
      this.pageCountsStatement ??= this.db.prepare(statementSql.pageCounts);
      outcome = compactIfMostlyFree(this.db, this.pageCountsStatement, this.compaction);
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

}

/** The file's layout (see cellFormatVersion); refused if this code does not know it. */
function checkedFormatVersion(db: Database.Database, path: string): number {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > cellFormatVersion) {
    const cause = Object.assign(
      new Error(`its format is ${version}, and this celld reads formats up to ${cellFormatVersion}`),
      { code: "ERR_CELL_FORMAT_NEWER" },
    );
    throw new CellError(
      "ERR_STORAGE",
      `the queue's storage failed: opening ${path}: written by a newer celld (${cause.message}); ` +
        "nothing in it was changed: run that celld or a newer one on this data directory",
      { cause },
    );
  }
  return version;
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