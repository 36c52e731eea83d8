import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { CellError } from "../errors.ts";
import { fromErrorData, toErrorData } from "./error-transport.ts";
import { columnBuffers } from "./message-columns.ts";
import type { CellHandle, CellMethod, CellThreadParameters, CellUpdate, FromThread, RegistryMethod, ToThread } from "./protocol.ts";
import { isBatch, PortOutbox, type MessageBatch } from "./port-outbox.ts";
import type { CellCalls, RemoteCell } from "./remote-cell.ts";

/** What a ThreadLink tells its registry of (ThreadedCellRegistry). */
export interface LinkEvents {
  /** A cell handle the thread answered: the RemoteCell for it (the same one for the same handle). */
  cellFor(link: ThreadLink, handle: CellHandle): RemoteCell;
  updated(link: ThreadLink, update: CellUpdate): void;
  syncTimed(seconds: number): void;
  backgroundError(error: Error): void;
  warning(message: string): void;
  /** A request of the thread's (a dead-letter move to a queue another thread owns). */
  request(request: Extract<FromThread, { kind: "request" }>): Promise<unknown>;
  /** The thread ended without being asked to. */
  died(link: ThreadLink, error: Error): void;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  /** The queue the call is about, for the words of a thread's death. */
  queue: string | undefined;
  /** It answers a cell handle (open, openExisting), for which the RemoteCell is given. */
  opens: boolean;
}

/**
 * The main thread's end of one cell thread: starts it on first use (and again after it died),
 * numbers calls and matches their answers, and keeps the RemoteCells of the thread's handles.
 */
export class ThreadLink implements CellCalls {
  private worker: Worker | undefined;
  /** What goes to the running thread, a turn's messages posted as one (PortOutbox). */
  private outbox: PortOutbox<ToThread> | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** The RemoteCells of the running thread, by its handle. */
  readonly cells = new Map<number, RemoteCell>();
  /** Holds asked for, given again to a thread started after one died. */
  private readonly holds = new Map<number, string>();
  private nextHold = 1;
  /** The thread is being ended on purpose (closeAll, terminate): its exit is no death. */
  private ending = false;

  constructor(
    readonly thread: number,
    private readonly parameters: CellThreadParameters,
    private readonly events: LinkEvents,
  ) {}

  get running(): boolean {
    return this.worker !== undefined;
  }

  /** A registry call on the thread, starting it if it is not running. */
  request(method: RegistryMethod, args: unknown[]): Promise<unknown> {
    const id = this.nextId++;
    const queue = typeof args[0] === "string" ? args[0] : undefined;
    return this.send({ kind: "registry", id, method, args }, id, queue, method === "open" || method === "openExisting");
  }

  call(cell: RemoteCell, method: CellMethod, args: unknown[], signal?: AbortSignal): Promise<unknown> {
    // A cell of a thread that died is closed (markClosed); this one's thread is the running one.
    const id = this.nextId++;
    const abortable = signal !== undefined;
    const answer = this.send({ kind: "call", id, handle: cell.handle, name: cell.name, method, args, abortable, aborted: signal?.aborted === true }, id, cell.name, false);
    if (abortable && signal.aborted !== true) {
      const cancel = (): void => this.post({ kind: "cancel", id });
      signal.addEventListener("abort", cancel, { once: true });
      void answer.then(
        () => signal.removeEventListener("abort", cancel),
        () => signal.removeEventListener("abort", cancel),
      );
    }
    return answer;
  }

  /** Keeps `name` open on the thread until the returned function is called (CellRegistry.hold). */
  hold(name: string): () => void {
    const hold = this.nextHold++;
    this.holds.set(hold, name);
    if (this.worker !== undefined) this.post({ kind: "hold", hold, name });
    return () => {
      if (!this.holds.delete(hold)) return;
      if (this.worker !== undefined) this.post({ kind: "unhold", hold });
    };
  }

  /**
   * Ends the thread and waits for its exit: after closing its cells (closeAll), or at once, as a
   * crash would (`crash`: its pending calls fail as on a death, and it is told as one).
   */
  async end(how: "close" | "crash"): Promise<void> {
    if (this.worker === undefined) return this.exited;
    if (how === "close") {
      await this.request("closeAll", []);
      this.ending = true;
    }
    const exited = this.exited;
    await this.worker?.terminate();
    await exited;
  }

  private send(message: ToThread, id: number, queue: string | undefined, opens: boolean): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, queue, opens });
      this.post(message, message.kind === "call" ? columnBuffers(message.args[0]) : []);
    });
  }

  private post(message: ToThread, transfer: ArrayBuffer[] = []): void {
    if (this.worker === undefined) this.start();
    this.outbox!.post(message, transfer);
  }

  /** A call whose arguments could not be cloned fails as postMessage threw it. */
  private undeliverable(message: ToThread, error: unknown): void {
    if (message.kind !== "call" && message.kind !== "registry") throw error;
    const call = this.pending.get(message.id);
    this.pending.delete(message.id);
    call?.reject(error);
  }

  private start(): Worker {
    const worker = new Worker(threadFile(), {
      workerData: this.parameters,
      // Not the parent's: a `node --import tsx` parent would register tsx twice (cell-thread.mjs).
      execArgv: [],
      name: `celld cell thread ${this.thread}`,
    });
    this.worker = worker;
    this.outbox = new PortOutbox<ToThread>(
      (message, transfer) => worker.postMessage(message, transfer),
      (message, error) => this.undeliverable(message, error),
      // process.nextTick from a promise job runs once the job queue is empty: after every
      // continuation the answers released, so the calls they make go in this batch.
      (post) => process.nextTick(post),
    );
    this.ending = false;
    let failure: Error | undefined;
    worker.on("message", (message: FromThread | MessageBatch<FromThread>) => {
      if (!isBatch(message)) return this.receive(message);
      for (const one of message.messages) this.receive(one);
    });
    worker.on("error", (error) => (failure = error));
    this.exited = new Promise((resolve) => {
      worker.on("exit", (code) => {
        this.onExit(code, failure);
        resolve();
      });
    });
    for (const [hold, name] of this.holds) this.post({ kind: "hold", hold, name });
    return worker;
  }

  private onExit(code: number, failure: Error | undefined): void {
    this.worker = undefined;
    this.outbox?.clear();
    this.outbox = undefined;
    const queues = [...new Set([...this.cells.values()].map((cell) => cell.name))];
    for (const cell of this.cells.values()) cell.markClosed();
    this.cells.clear();
    const why = failure === undefined ? `exit code ${code}` : failure.message;
    const ended = this.ending;
    for (const [id, call] of this.pending) {
      this.pending.delete(id);
      call.reject(threadExited(this.thread, why, call.queue, queues, ended));
    }
    if (!ended) this.events.died(this, new Error(`cell thread ${this.thread} exited (${why}); its queues (${queues.map((q) => `"${q}"`).join(", ") || "none open"}) open on a new thread at their next call`));
  }

  private receive(message: FromThread): void {
    switch (message.kind) {
      case "answer":
        return this.answered(message);
      case "updates":
        for (const update of message.updates) this.events.updated(this, update);
        for (const seconds of message.syncSeconds ?? []) this.events.syncTimed(seconds);
        return;
      case "pausedChange":
        this.cells.get(message.handle)?.pausedChanged(message.mirror);
        return;
      case "closing":
        this.cells.get(message.handle)?.markClosed();
        this.cells.delete(message.handle);
        return;
      case "backgroundError":
        return this.events.backgroundError(fromErrorData(message.error));
      case "warning":
        return this.events.warning(message.message);
      case "request":
        void this.events.request(message).then(
          (value) => this.post({ kind: "answer", id: message.id, ok: true, value }),
          (error: unknown) => this.post({ kind: "answer", id: message.id, ok: false, error: toErrorData(error) }),
        );
        return;
    }
  }

  private answered(message: Extract<FromThread, { kind: "answer" }>): void {
    const call = this.pending.get(message.id);
    this.pending.delete(message.id);
    // Before the caller goes on: what it reads of the mirror next includes its own call.
    if (message.update !== undefined) this.events.updated(this, message.update);
    if (call === undefined) return;
    if (!message.ok) return call.reject(fromErrorData(message.error));
    const value = message.value;
    call.resolve(call.opens && value !== undefined ? this.events.cellFor(this, value as CellHandle) : value);
  }
}

/**
 * What a call pending on a thread that died is refused with: ERR_STORAGE, which the runtime maps
 * to "unavailable, retry" (as a storage failure that may have taken effect, and stopped nothing:
 * what was committed was committed before it was answered, and the next call opens the queue on a
 * new thread). A thread ended on purpose (closeAll) refuses as a closed queue.
 */
function threadExited(thread: number, why: string, queue: string | undefined, queues: string[], ended: boolean): CellError {
  const subject = queue === undefined ? "this call" : `queue "${queue}"`;
  if (ended) return new CellError("ERR_CELL_CLOSED", `${subject}: every queue is closing`);
  const detail = `cell thread ${thread} (queues ${queues.map((q) => `"${q}"`).join(", ") || "none open"}) exited: ${why}`;
  return new CellError("ERR_STORAGE", `${subject}: ${detail}; this call may or may not have taken effect, and the next call opens the queue on a new thread`, {
    storage: { queue: queue ?? "", cause: "other", detail, mayHaveTakenEffect: true, writesStopped: false },
  });
}

/**
 * The thread's entry (cell-thread.mjs), found through this package's own name so that a bundle of
 * this module (the crash test's child) finds it too, as WalCheckpointer finds its thread.
 */
function threadFile(): string {
  return createRequire(import.meta.url).resolve("@celld/queue-cell/cell-thread");
}
