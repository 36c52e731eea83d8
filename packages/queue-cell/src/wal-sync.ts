import { closeSync, fdatasync, fsyncSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { CellError } from "./errors.ts";

/** Flushes a file's data to disk and calls back; fs.fdatasync, or a test's stand-in. */
export type SyncFile = (fd: number, done: (error: Error | null) => void) => void;

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Makes a SQLite WAL durable without blocking the event loop: SQLite commits with
 * synchronous=OFF (its frames reach the OS, not the disk) and this flushes the WAL file with
 * fdatasync on libuv's thread pool. A call resolves once a flush that started after it was made
 * has finished, so it covers every commit before it. Calls made while a flush runs share the
 * next one: one fdatasync serves every group committed in the meantime.
 */
export class WalSync {
  private fd: number | undefined;
  private running = false;
  private waiting: Waiter[] = [];
  /** The callers of the flush now running. */
  private flushing: Waiter[] = [];
  /** A flush failed, so what is committed may not be on disk: the next call flushes, wrote or not. */
  private unflushedFailure = false;
  private closed = false;

  constructor(
    private readonly walPath: string,
    private readonly syncFile: SyncFile = fdatasync,
    /** Told after each successful flush, with no flush running (the store checkpoints then). */
    private readonly afterFlush: () => void = () => {},
  ) {}

  /**
   * Opens the WAL (it must exist) and flushes its directory once, so that the file itself
   * survives a power cut: SQLite, with synchronous=OFF, does not.
   */
  open(): void {
    this.fd = openSync(this.walPath, "r");
    const dir = openSync(dirname(this.walPath), "r");
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  }

  /**
   * Resolves when everything committed before this call is on disk; undefined if it already is.
   * `wrote` says whether anything was committed since the last call. A group that wrote nothing
   * (a lease that found no message) needs no flush of its own: the flush already asked for, if
   * one is still running or waiting, covers what it read. Without this, an idle consumer's empty
   * leases each cost an fdatasync, and a send arriving meanwhile waited behind it.
   */
  durable(wrote = true): Promise<void> | undefined {
    if (wrote || this.unflushedFailure) {
      this.unflushedFailure = false;
      return new Promise<void>((resolve, reject) => {
        this.waiting.push({ resolve, reject });
        if (!this.running) this.flush();
      });
    }
    const covering = this.waiting.length > 0 ? this.waiting : this.running ? this.flushing : undefined;
    if (covering === undefined) return undefined;
    return new Promise<void>((resolve, reject) => void covering.push({ resolve, reject }));
  }

  /** Closes the WAL handle once no flush is running (SQLite may already have deleted the file). */
  close(): void {
    this.closed = true;
    if (!this.running) this.release();
  }

  private flush(): void {
    const fd = this.fd;
    const batch = this.waiting;
    this.waiting = [];
    this.flushing = batch;
    if (fd === undefined) {
      const error = new CellError("ERR_STORAGE", "the queue's storage failed: its write-ahead log is not open");
      for (const w of batch) w.reject(error);
      return;
    }
    this.running = true;
    this.syncFile(fd, (error) => {
      this.running = false;
      if (error === null) {
        for (const w of batch) w.resolve();
      } else {
        this.unflushedFailure = true;
        // What the disk holds is unknown: every caller is told the write failed; none is told it
        // is durable.
        const failure = new CellError("ERR_STORAGE", `the queue's storage failed: flushing its log: ${error.message}`, {
          cause: error,
        });
        for (const w of batch) w.reject(failure);
      }
      if (this.waiting.length > 0) this.flush();
      else if (this.closed) this.release();
      else if (error === null) this.afterFlush();
    });
  }

  private release(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}
