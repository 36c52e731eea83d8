import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * Copies cells' logs into their database files on a thread of its own, so that the copy and the
 * flush of the database file do not hold the event loop: done inline, a checkpoint of a 16 MiB log
 * held it 50-68 ms while a backlog was being written, and 15-21 ms while one was leased and acked
 * (measured here, 300,000 messages), stalling every queue and request of the host meanwhile.
 *
 * The thread runs a PASSIVE checkpoint on a connection of its own, with synchronous=FULL: SQLite
 * flushes the log before copying it. It flushes the database file only after a copy that reaches
 * the end of the log, and under steady writes none does, so the thread flushes the file after each
 * copy. It never waits for the writer, so commits go on meanwhile; what they add is left for the
 * store's short RESTART afterwards (see SqliteFile.checkpointIfLarge). Until that RESTART,
 * the log keeps every frame, so a crash at any point loses nothing.
 *
 * It also truncates the log of a queue gone quiet (see SqliteFile.truncateLogIfIdle): cutting
 * a log of a few MiB is one ftruncate, and that alone held the event loop 3-19 ms here (5.3 MiB).
 *
 * One thread serves every cell of the process, one request at a time, with a connection per file,
 * kept until the file's log is truncated (its queue is quiet) or its store closes.
 */
export class WalCheckpointer {
  private static shared: WalCheckpointer | undefined;

  /** The process's checkpointer, started on first use. */
  static get(): WalCheckpointer {
    WalCheckpointer.shared ??= new WalCheckpointer();
    return WalCheckpointer.shared;
  }

  /** forget() on the running thread; a thread that died (or never ran) holds no connection. */
  static forgetIfRunning(path: string): void {
    WalCheckpointer.shared?.forget(path);
  }

  private readonly worker: Worker;
  private dead = false;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();
  /** Requests sent and not answered; the thread keeps the process alive only while there are some. */
  private inFlight = 0;

  private constructor() {
    this.worker = new Worker(threadFile(), { workerData: threadParameters() });
    this.worker.unref();
    this.worker.on("message", (reply: Reply) => {
      const waiter = this.pending.get(reply.id);
      if (waiter === undefined) return; // a synchronous close, answered through its shared flag
      this.pending.delete(reply.id);
      this.release();
      if (reply.error === undefined) waiter.resolve(reply);
      else waiter.reject(reply.flushFailed === true ? new CheckpointFlushError(reply.error) : new Error(reply.error));
    });
    // The thread died (it catches SQLite's errors itself): fail what waits, so no store waits on a
    // copy forever with its log growing, and start a new thread at the next checkpoint.
    const died = (error: Error): void => {
      this.dead = true;
      if (WalCheckpointer.shared === this) WalCheckpointer.shared = undefined;
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    };
    this.worker.on("error", died);
    this.worker.on("exit", (code) => died(new Error(`the checkpoint thread exited (code ${code})`)));
  }

  /** Copies what it can of `path`'s log into the file, without waiting for its writer. */
  async checkpoint(path: string): Promise<void> {
    await this.ask("checkpoint", path);
  }

  /**
   * Copies what is left of `path`'s log into the file and truncates the log to nothing
   * (`wal_checkpoint(TRUNCATE)` with synchronous=FULL: the copy flushes both files, and SQLite cuts
   * the log only once every frame is in the flushed file). It holds the log's write lock meanwhile,
   * so the writer keeps its groups until it answers (SqliteFile.writesHeld): asked for only
   * once the queue is quiet and its log already copied, when that is a truncation alone. False
   * when a reader kept it from finishing.
   *
   * `claim` (see truncationClaim): the thread takes it as it starts, and skips the truncation,
   * answering true, if the writer took it first. A request may wait on this thread behind other
   * queues' copies, holding nothing meanwhile; a send then need not wait for all of them.
   */
  async truncate(path: string, claim?: Int32Array): Promise<boolean> {
    return (await this.ask("truncate", path, claim)).busy !== true;
  }

  private ask(kind: "checkpoint" | "truncate", path: string, claim?: Int32Array): Promise<Reply> {
    // A dead thread answers nothing: a caller still holding this instance is told at once.
    if (this.dead) return Promise.reject(new Error("the checkpoint thread has stopped"));
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.hold();
      this.worker.postMessage({ id, kind, path, ...(claim === undefined ? {} : { claim }) } satisfies Request);
    });
  }

  /**
   * Closes the thread's connection to `path`, after any checkpoint of it already asked for, and
   * returns once it is closed: the writer's own close is then the last, which copies the rest of
   * the log and deletes it. Synchronous, because closing a store is; bounded by `timeoutMs`, after
   * which the writer closes anyway and leaves its log for the next open.
   */
  forget(path: string, timeoutMs = 10_000): void {
    if (this.dead) return;
    const done = new Int32Array(new SharedArrayBuffer(4));
    this.worker.postMessage({ id: 0, kind: "forget", path, done } satisfies Request);
    Atomics.wait(done, 0, 0, timeoutMs);
  }

  private hold(): void {
    if (this.inFlight++ === 0) this.worker.ref();
  }

  private release(): void {
    if (--this.inFlight === 0) this.worker.unref();
  }
}

/**
 * A checkpoint's flush failed: of the database file after a copy, or of the log by SQLite. The
 * copy may already count as done (a PASSIVE copy that stops short of the log's end moves SQLite's
 * mark without flushing the file), and Linux may have dropped the pages it could not write: see
 * SqliteFile's checkpointFailed for what the store does.
 */
export class CheckpointFlushError extends Error {
  override readonly name = "CheckpointFlushError";
}

/**
 * A truncation's claim, shared with the thread: asked for (0) until the thread starts it (1) or the
 * writer, committing first, cancels it (2), whichever compareExchange comes first.
 */
export const truncationClaim = { asked: 0, started: 1, cancelled: 2 } as const;

export function newTruncationClaim(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4));
}

type Request =
  | { id: number; kind: "checkpoint"; path: string }
  | { id: number; kind: "truncate"; path: string; claim?: Int32Array }
  | { id: 0; kind: "forget"; path: string; done: Int32Array };

interface Reply {
  id: number;
  error?: string;
  /** The error was a failed flush (see CheckpointFlushError). */
  flushFailed?: boolean;
  /** A truncation a reader kept from finishing: the log was not cut. */
  busy?: boolean;
}

/**
 * The thread's code (wal-checkpoint.thread.cjs), found through this package's own name so that a
 * bundle of this module (the crash test's child) finds it too. Plain CommonJS: it must not need
 * the host's TypeScript loader, and needs only better-sqlite3, resolved from here.
 */
function threadFile(): string {
  return createRequire(import.meta.url).resolve("@celld/queue-cell/wal-checkpoint.thread");
}

/** What the thread is given (ThreadParameters in wal-checkpoint.thread.cjs). */
function threadParameters(): { betterSqlite3: string; claim: typeof truncationClaim } {
  return { betterSqlite3: createRequire(import.meta.url).resolve("better-sqlite3"), claim: truncationClaim };
}
