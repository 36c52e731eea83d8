import type { QueueConfig } from "../cell-config.ts";
import { CellDirectory } from "../cell-directory.ts";
import type { CellObserver } from "../cell-observer.ts";
import type { QueueCells } from "../cell-surface.ts";
import { systemClock, systemClockOrigin } from "../clock.ts";
import { CellError } from "../errors.ts";
import { limits } from "../limits.ts";
import type { CellRegistryOptions } from "../registry.ts";
import type { StoredMessage } from "../store.ts";
import { ownerOf } from "./owner-hash.ts";
import type { CellHandle, CellUpdate, FromThread } from "./protocol.ts";
import { RemoteCell } from "./remote-cell.ts";
import type { ThreadCpu, ThreadCpuTimes } from "./thread-cpu.ts";
import { ThreadLink, type LinkEvents } from "./thread-link.ts";

export interface ThreadedCellRegistryOptions extends Omit<CellRegistryOptions, "syncFile" | "resolveElsewhere" | "onCellClosing"> {
  /** Cell threads, 1 to limits.cellThreadsMax. */
  threads: number;
  /**
   * Told how long each flush of a cell's log (fdatasync) took on its thread, s: the host's flush
   * figures. A SyncFile function cannot cross threads, so a threaded registry takes this instead.
   */
  onFileSynced?: (seconds: number) => void;
}

/**
 * The cells of a data directory on `threads` worker threads, so that queue work uses more than
 * one core. Each thread runs a plain CellRegistry on the same directory and owns the queues whose
 * names hash to it (ownerOf), so one file is only ever opened by one thread: a cell keeps its
 * single writer. open() answers a RemoteCell; the directory's listing (storedNames, diskUsage,
 * pathOf) is read here. A thread that dies fails the calls it had not answered (ERR_STORAGE,
 * which may have taken effect) and its queues open on a new thread at their next call.
 *
 * Unlike CellRegistry's, closeAll() ends the threads: after it, the registry opens nothing more.
 * Cells run on the system clock (a test's ManualClock cannot cross threads).
 */
export class ThreadedCellRegistry implements QueueCells {
  private readonly links: ThreadLink[];
  private readonly directory: CellDirectory;
  /** Open cells by name: the latest RemoteCell answered for each. */
  private readonly byName = new Map<string, RemoteCell>();
  /** Names whose open has been asked and not answered, with how many such opens. */
  private readonly opening = new Map<string, number>();
  private readonly observers = new Map<string, CellObserver | undefined>();
  private closed = false;

  constructor(private readonly options: ThreadedCellRegistryOptions) {
    const { threads } = options;
    if (typeof threads !== "number" || !Number.isInteger(threads) || threads < 1 || threads > limits.cellThreadsMax) {
      throw new RangeError(`threads must be a whole number from 1 to ${limits.cellThreadsMax}, got ${String(threads)}`);
    }
    if (options.clock !== undefined && options.clock !== systemClock) {
      throw new TypeError("a ThreadedCellRegistry's cells run on the system clock: a clock object cannot cross threads (use a CellRegistry with a test's clock)");
    }
    for (const field of ["syncFile", "resolveElsewhere", "onCellClosing"] as const) {
      if ((options as unknown as Record<string, unknown>)[field] !== undefined) {
        throw new TypeError(`a ThreadedCellRegistry takes no ${field}: a function cannot cross threads${field === "syncFile" ? " (onFileSynced times each thread's flushes)" : ""}`);
      }
    }
    this.directory = new CellDirectory(options.dataDir, options.onWarning);
    const events = this.linkEvents();
    this.links = Array.from(
      { length: threads },
      (_, thread) =>
        new ThreadLink(
          thread,
          {
            thread,
            threads,
            dataDir: options.dataDir,
            durability: options.durability,
            idleCloseMs: options.idleCloseMs,
            // The bound is the host's; each thread keeps its share of it.
            openCellsMax: options.openCellsMax === undefined ? undefined : Math.max(1, Math.ceil(options.openCellsMax / threads)),
            forwardTallies: options.observe !== undefined,
            forwardSyncTimes: options.onFileSynced !== undefined,
            clockOrigin: systemClockOrigin(),
          },
          events,
        ),
    );
  }

  get threads(): number {
    return this.links.length;
  }

  /** The index of the thread that owns `name`'s cell. */
  threadOf(name: string): number {
    return ownerOf(name, this.links.length);
  }

  open(name: string, config?: Partial<QueueConfig>): Promise<RemoteCell> {
    return this.opened(name, "open", config === undefined ? [name] : [name, config]) as Promise<RemoteCell>;
  }

  openExisting(name: string): Promise<RemoteCell | undefined> {
    return this.opened(name, "openExisting", [name]);
  }

  private async opened(name: string, method: "open" | "openExisting", args: unknown[]): Promise<RemoteCell | undefined> {
    if (this.closed) throw new CellError("ERR_CELL_CLOSED", `queue "${name}" is closed: every queue is closing`);
    this.opening.set(name, (this.opening.get(name) ?? 0) + 1);
    try {
      return (await this.linkOf(name).request(method, args)) as RemoteCell | undefined;
    } finally {
      const n = (this.opening.get(name) ?? 1) - 1;
      if (n === 0) this.opening.delete(name);
      else this.opening.set(name, n);
    }
  }

  hold(name: string): () => void {
    return this.linkOf(name).hold(name);
  }

  openCells(): RemoteCell[] {
    return [...this.byName.values()].filter((cell) => !cell.isClosed);
  }

  openNames(): string[] {
    const names = new Set(this.openCells().map((cell) => cell.name));
    for (const name of this.opening.keys()) names.add(name);
    return [...names];
  }

  storedNames(): string[] {
    return this.directory.storedNames();
  }

  diskUsage(): { queues: number; bytes: number } {
    return this.directory.diskUsage();
  }

  pathOf(name: string): string {
    return this.directory.pathOf(name);
  }

  async drop(name: string): Promise<void> {
    if (this.closed) throw new CellError("ERR_CELL_CLOSED", `queue "${name}" is closed: every queue is closing`);
    await this.linkOf(name).request("drop", [name]);
  }

  async close(name: string): Promise<void> {
    const link = this.linkOf(name);
    // A thread not running has nothing open.
    if (link.running) await link.request("close", [name]);
  }

  async closeIdle(idleMs: number): Promise<string[]> {
    const running = this.links.filter((link) => link.running);
    const closed = await Promise.all(running.map(async (link) => (await link.request("closeIdle", [idleMs])) as string[]));
    return closed.flat();
  }

  /** Closes every cell, then ends every thread and waits for it to exit. The registry is done. */
  async closeAll(): Promise<void> {
    this.closed = true;
    await Promise.all(this.links.map((link) => link.end("close")));
  }

  /** Each running thread's CPU time (a thread not started has none); empty where /proc/thread-self is missing. */
  async threadCpu(): Promise<ThreadCpu[]> {
    const running = this.links.filter((link) => link.running);
    const times = await Promise.all(running.map(async (link) => ({ thread: link.thread, times: (await link.request("threadCpu", [])) as ThreadCpuTimes | undefined })));
    return times.flatMap(({ thread, times: t }) => (t === undefined ? [] : [{ thread, ...t }]));
  }

  /**
   * Ends a thread at once, as a crash would: its pending calls fail, its queues open on a new
   * thread at their next call. For tests of what a dying thread leaves behind.
   */
  async terminateThread(thread: number): Promise<void> {
    const link = this.links[thread];
    if (link === undefined) throw new RangeError(`thread must be from 0 to ${this.links.length - 1}, got ${thread}`);
    await link.end("crash");
  }

  private linkOf(name: string): ThreadLink {
    return this.links[ownerOf(name, this.links.length)]!;
  }

  private linkEvents(): LinkEvents {
    return {
      cellFor: (link, handle) => this.cellFor(link, handle),
      updated: (link, update) => this.updated(link, update),
      syncTimed: (seconds) => this.options.onFileSynced?.(seconds),
      backgroundError: (error) => this.options.onBackgroundError?.(error),
      warning: (message) => this.options.onWarning?.(message),
      request: (request) => this.answerThread(request),
      died: (_link, error) => this.options.onBackgroundError?.(error),
    };
  }

  private cellFor(link: ThreadLink, { handle, name, mirror }: CellHandle): RemoteCell {
    let cell = link.cells.get(handle);
    if (cell === undefined) {
      // Asked at every open of a cell, as CellRegistry asks: what it counts outlives the cell.
      this.observers.set(name, this.options.observe?.(name));
      cell = new RemoteCell(link, handle, name, mirror, () => this.observers.get(name));
      link.cells.set(handle, cell);
    } else {
      cell.updated(mirror);
    }
    this.byName.set(name, cell);
    return cell;
  }

  private updated(link: ThreadLink, update: CellUpdate): void {
    if (update.mirror !== undefined) link.cells.get(update.handle)?.updated(update.mirror);
    if (update.tally !== undefined) {
      if (!this.observers.has(update.name)) this.observers.set(update.name, this.options.observe?.(update.name));
      this.observers.get(update.name)?.committed(update.tally);
    }
  }

  /** A thread's dead-letter move to a queue another thread owns: the owner's cell, if the queue exists. */
  private async answerThread(request: Extract<FromThread, { kind: "request" }>): Promise<unknown> {
    const target = await this.openExisting(request.name);
    if (request.method === "targetExists") return target !== undefined;
    if (target === undefined) throw new CellError("ERR_CELL_CLOSED", `queue "${request.name}" is closed`);
    return target.receiveDeadLetters(request.messages as readonly StoredMessage[]);
  }
}
