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
 * store's short RESTART afterwards (see SqliteCellStore.checkpointIfLarge). Until that RESTART,
 * the log keeps every frame, so a crash at any point loses nothing.
 *
 * It also truncates the log of a queue gone quiet (see SqliteCellStore.truncateLogIfIdle): cutting
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
    this.worker = new Worker(checkpointerSource, { eval: true });
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
   * so the writer keeps its groups until it answers (SqliteCellStore.writesHeld): asked for only
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
 * SqliteCellStore's checkpointFailed for what the store does.
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

// The thread's code, evaluated as CommonJS. It must not run the host's TypeScript loader, and
// needs only better-sqlite3, resolved from here.
const checkpointerSource = `
const { openSync, closeSync, fsyncSync } = require("node:fs");
const { parentPort } = require("node:worker_threads");
const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve("better-sqlite3"))});
const files = new Map();
function forget(path) {
  const file = files.get(path);
  files.delete(path);
  try {
    file?.db.close();
  } catch {}
  // Closing a file drops every POSIX lock this process holds on it, SQLite's included. Under the
  // data directory's lock no other process opens the file, and in this process SQLite keeps its
  // locks in memory, so the writer's connection does not rely on them.
  try {
    if (file !== undefined) closeSync(file.fd);
  } catch {}
}
parentPort.on("message", (request) => {
  if (request.kind === "forget") {
    forget(request.path);
    Atomics.store(request.done, 0, 1);
    Atomics.notify(request.done, 0);
    return;
  }
  // The writer committed while this waited here: its queue is in use again, so no truncation.
  const claim = request.claim;
  if (claim !== undefined && Atomics.compareExchange(claim, 0, ${truncationClaim.asked}, ${truncationClaim.started}) === ${truncationClaim.cancelled}) {
    parentPort.postMessage({ id: request.id });
    return;
  }
  try {
    let file = files.get(request.path);
    if (file === undefined) {
      const db = new Database(request.path, { fileMustExist: true });
      db.pragma("wal_autocheckpoint = 0");
      db.pragma("synchronous = FULL");
      file = { db, fd: openSync(request.path, "r") };
      files.set(request.path, file);
    }
    if (request.kind === "truncate") {
      const [result] = file.db.pragma("wal_checkpoint(TRUNCATE)");
      // The queue is quiet: the next copy of its log opens the file again. Kept, the connection and
      // its descriptor held 3 more for every queue ever written (8 instead of 5), for good.
      if (result.busy === 0) forget(request.path);
      parentPort.postMessage({ id: request.id, busy: result.busy !== 0 });
      return;
    }
    file.db.pragma("wal_checkpoint(PASSIVE)");
    // SQLite flushes the file only after a copy that reaches the end of the log, which under
    // steady writes is the writer's short one: flushed here, that one has little left to flush.
    try {
      fsyncSync(file.fd);
    } catch (error) {
      error.flushFailed = true;
      throw error;
    }
    parentPort.postMessage({ id: request.id });
  } catch (error) {
    const flushFailed = error != null && (error.flushFailed === true || /^SQLITE_IOERR_(DIR_)?FSYNC$/.test(error.code));
    parentPort.postMessage({ id: request.id, error: String(error && error.message ? error.message : error), flushFailed });
  }
});
`;
