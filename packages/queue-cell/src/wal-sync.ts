import { close, closeSync, fdatasync, fsync, open, openSync } from "node:fs";
import { dirname } from "node:path";
import { CellError } from "./errors.ts";

/** Flushes a file's data to disk and calls back; fs.fdatasync, or a test's stand-in. */
export type SyncFile = (fd: number, done: (error: Error | null) => void) => void;

/**
 * A flush that worked may still not have put its commits where the next open looks (see
 * SqliteFile's filesLost): why its callers may not be on disk, and why no more writes are taken.
 */
export interface LostFlush {
  /** For the callers of the flush and of the groups committed while it ran. */
  uncertain: CellError;
  /** For every later call. */
  stopped: CellError;
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Flushes answered together (see WalSync): one, and one more that an urgent call (a producer's)
 * starts beside it rather than wait for it to end. No more join them, or a steady stream of
 * urgent calls would keep the first flush's callers from ever being answered.
 */
const overlappingFlushesMax = 2;

/**
 * Makes a SQLite WAL durable without blocking the event loop: SQLite commits with
 * synchronous=OFF (its frames reach the OS, not the disk) and this flushes the WAL file with
 * fdatasync on libuv's thread pool. A call resolves once a flush that started after it was made
 * has finished, so it covers every commit before it. Calls made while a flush runs share the
 * next one: one fdatasync serves every group committed in the meantime. An urgent call (a group
 * a producer waits on) starts a second flush at once instead, beside the running one.
 *
 * Flushes that overlap are answered together, once the last of them ends, and fail together: a
 * failed writeback is reported to one fdatasync of the file, not necessarily the one whose data
 * it held, so a flush that overlapped a failed one proves nothing.
 */
export class WalSync {
  private fd: number | undefined;
  /** Flushes now running (see overlappingFlushesMax). */
  private running = 0;
  private waiting: Waiter[] = [];
  /** The callers of the flushes now running, answered when the last of them ends. */
  private flushing: Waiter[] = [];
  /** The first error of the flushes now running. */
  private runningError: Error | null = null;
  /** Flushes started since none was running: they are answered together. */
  private overlapping = 0;
  /**
   * Set by the first flush that fails, for good. After a failed fsync, Linux may have dropped the
   * pages it could not write and reports the failure once: a later flush can succeed without them.
   * A commit after that would sit in the log past a hole that recovery stops at, so nothing more is
   * answered as durable on this log, and the store takes no more writes (see `failed`).
   */
  private failure: CellError | undefined;
  private closed = false;
  private directorySynced = false;

  constructor(
    private readonly walPath: string,
    private readonly syncFile: SyncFile = fdatasync,
    /** Told after each successful flush, with no flush running (the store checkpoints then). */
    private readonly afterFlush: () => void = () => {},
    /** Asked after each successful flush, before anyone is answered: whether it counts all the same. */
    private readonly lostAfterFlush: () => LostFlush | undefined = () => undefined,
  ) {}

  /**
   * Opens the WAL (it must exist). Its directory is flushed with the first flush (see flush), so
   * that the file itself survives a power cut: SQLite, with synchronous=OFF, does not.
   */
  open(): void {
    this.fd = openSync(this.walPath, "r");
  }

  /**
   * Resolves when everything committed before this call is on disk; undefined if it already is.
   * `wrote` says whether anything was committed since the last call. A group that wrote nothing
   * (a lease that found no message) needs no flush of its own: the flush already asked for, if
   * one is still running or waiting, covers what it read. Without this, an idle consumer's empty
   * leases each cost an fdatasync, and a send arriving meanwhile waited behind it. `urgent` (a
   * producer waits): a call that wrote starts its flush now even if one is running, rather than
   * wait for that one's end and then its own; what waited for the next flush goes with it.
   */
  durable(wrote = true, urgent = false): Promise<void> | undefined {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (wrote) {
      return new Promise<void>((resolve, reject) => {
        this.waiting.push({ resolve, reject });
        if (this.running === 0 || (urgent && this.overlapping < overlappingFlushesMax)) this.flush();
      });
    }
    const covering = this.waiting.length > 0 ? this.waiting : this.running > 0 ? this.flushing : undefined;
    if (covering === undefined) return undefined;
    return new Promise<void>((resolve, reject) => void covering.push({ resolve, reject }));
  }

  /** Why the log takes no more writes: a flush failed. Undefined while every flush has worked. */
  get failed(): CellError | undefined {
    return this.failure;
  }

  /** Closes the WAL handle once no flush is running (SQLite may already have deleted the file). */
  close(): void {
    this.closed = true;
    if (this.running === 0) this.release();
  }

  private flush(): void {
    const fd = this.fd;
    const batch = this.waiting;
    this.waiting = [];
    if (fd === undefined) {
      const error = new CellError("ERR_STORAGE", "the queue's storage failed: its write-ahead log is not open");
      for (const w of batch) w.reject(error);
      return;
    }
    for (const w of batch) this.flushing.push(w);
    this.running += 1;
    this.overlapping += 1;
    // The log's name, made by the open that created the file, must be on disk before anything in
    // it is answered. Flushed with the first flush, beside it on the thread pool, rather than at
    // open on the event loop: that fsync was the largest part of an open (1-5 ms here), and a cell
    // opened and closed without writing (its close deletes the log) needs it not at all.
    let running = 1;
    let failed: Error | null = null;
    const done = (error: Error | null): void => {
      failed ??= error;
      if (--running === 0) this.oneFlushed(failed);
    };
    if (!this.directorySynced) {
      this.directorySynced = true;
      running += 1;
      syncDirectory(dirname(this.walPath), done);
    }
    this.syncFile(fd, done);
  }

  /** One flush ended; the callers of all that overlapped it are answered once the last ends. */
  private oneFlushed(error: Error | null): void {
    this.runningError ??= error;
    if (--this.running > 0) return;
    this.overlapping = 0;
    const batch = this.flushing;
    this.flushing = [];
    const failed = this.runningError;
    this.runningError = null;
    this.flushed(batch, failed);
  }

  private flushed(batch: Waiter[], error: Error | null): void {
    const lost = error === null ? this.lostAfterFlush() : failedFlush(error);
    if (lost === undefined) {
      for (const w of batch) w.resolve();
    } else {
      this.failure ??= lost.stopped;
      // Those committed while this flush ran wait for the next, which will not come: their
      // writes are in the log as well.
      for (const w of batch.concat(this.waiting.splice(0))) w.reject(lost.uncertain);
    }
    if (this.waiting.length > 0) this.flush();
    else if (this.closed) this.release();
    else if (lost === undefined) this.afterFlush();
  }

  private release(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}

/**
 * What the disk holds is unknown: no caller is told its write is durable, and each is told that it
 * may have taken effect all the same (it is in the log, and a restart may find it).
 */
function failedFlush(error: Error): LostFlush {
  return {
    stopped: new CellError(
      "ERR_STORAGE",
      `the queue's storage failed: flushing its log to disk failed earlier (${error.message}), so it takes no ` +
        "more writes until celld is restarted; what was answered before that failure is on disk",
      { cause: error },
    ),
    uncertain: new CellError(
      "ERR_STORAGE",
      `the queue's storage failed: flushing its log to disk failed (${error.message}); this call may or may not ` +
        "have taken effect, and the queue takes no more writes until celld is restarted",
      { cause: error },
    ),
  };
}

/** fsync of a directory, on the thread pool. */
function syncDirectory(path: string, done: (error: Error | null) => void): void {
  open(path, "r", (error, fd) => {
    if (error !== null) return done(error);
    fsync(fd, (syncError) => close(fd, (closeError) => done(syncError ?? closeError ?? null)));
  });
}
