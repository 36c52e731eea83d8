import { existsSync, rmSync } from "node:fs";
import type { CellCounts } from "./cell-calls.ts";
import type { QueueConfig } from "./cell-config.ts";
import { systemClock, type Clock } from "./clock.ts";
import { CellError } from "./errors.ts";
import { UlidSource } from "./ids.ts";
import { limits } from "./limits.ts";
import { QueueCell } from "./sqlite-queue-cell.ts";
import type { CellObserver } from "./cell-observer.ts";
import type { DeadLetterTarget } from "./dead-letter-mover.ts";
import type { CellCore } from "./queue-cell.ts";
import { CellDirectory } from "./cell-directory.ts";
import type { QueueCells } from "./cell-surface.ts";
import type { Durability } from "./sqlite-file.ts";
import type { SyncFile } from "./wal-sync.ts";

export interface CellRegistryOptions {
  /** Cells live in `<dataDir>/cells/` (mode 0700), one SQLite file each. */
  dataDir: string;
  clock?: Clock;
  durability?: Durability;
  onBackgroundError?: (error: unknown) => void;
  /** Told when a cell keeps dead letters in its own set because their dead-letter queue does not exist. */
  onWarning?: (message: string) => void;
  /**
   * Close a cell after it has been idle this long (see QueueCell.idleSince); it reopens on the
   * next use. Unset: cells stay open until closed.
   */
  idleCloseMs?: number;
  /**
   * Open cells above which opening another first closes the least recently used idle ones
   * (limits.openCellsMax unless set). Cells in use stay open, so more may be open for a while.
   */
  openCellsMax?: number;
  /**
   * The observer of each cell by queue name (QueueCellOptions.observer), asked at every open: what
   * it counts outlives the cell, which the registry may close and reopen.
   */
  observe?: (name: string) => CellObserver | undefined;
  /** How every cell's store flushes its log (fs.fdatasync unless set): the host times it. */
  syncFile?: SyncFile;
  /**
   * Finds a dead-letter move's target queue outside this registry: a registry on a worker thread
   * asks the main thread for the queues other threads own. Undefined: the queue is this one's.
   */
  resolveElsewhere?: (name: string) => Promise<DeadLetterTarget | undefined> | undefined;
  /** Told as each cell this registry opened begins to close, whoever closes it. */
  onCellClosing?: (cell: QueueCell) => void;
  /** Told after each group a cell of this registry committed (its calls answered). */
  onCellCommitted?: (cell: QueueCell, counts: CellCounts | undefined) => void;
}

/**
 * Opens each queue's cell once, lazily, and lets cells find one another for dead-letter moves.
 * Which file a name maps to, and what is on disk, is CellDirectory's.
 */
export class CellRegistry implements QueueCells {
  /** Open cells, least recently used first: open() moves a name to the end. */
  private readonly cells = new Map<string, Promise<QueueCell>>();
  /** The cells of `cells` that have finished opening, for a synchronous look at their idleness (unordered). */
  private readonly opened = new Map<string, QueueCell>();
  /** Names a long-lived user holds open (hold()), with how many holds each. */
  private readonly held = new Map<string, number>();
  /** Cells closing in the background, by name: the next open of the name waits for it. */
  private readonly closingCells = new Map<string, Promise<void>>();
  private readonly openCellsMax: number;
  private readonly directory: CellDirectory;
  private readonly clock: Clock;
  private readonly ids = new UlidSource();
  private closing = false;
  /** Names whose files drop() is removing. */
  private readonly dropping = new Set<string>();
  /**
   * The time each cell closed idle had reached, to start from when it reopens. After a start on a
   * clock behind a queue's newest message, a cell's time runs ahead of the clock; reopened from
   * its newest message's entry time, its time would go back, and every delay and lease it had
   * set would last that much longer.
   */
  private readonly closedAt = new Map<string, number>();

  constructor(private readonly options: CellRegistryOptions) {
    this.directory = new CellDirectory(options.dataDir, options.onWarning);
    this.clock = options.clock ?? systemClock;
    this.openCellsMax = options.openCellsMax ?? limits.openCellsMax;
    if (options.idleCloseMs !== undefined) this.armIdleSweep(options.idleCloseMs);
  }

  private cancelIdleSweep: (() => void) | undefined;

  /**
   * Closes every open cell idle for at least `idleMs`; returns their names. A timer calls it when
   * `idleCloseMs` is set; tests call it directly.
   */
  async closeIdle(idleMs: number): Promise<string[]> {
    const closed: string[] = [];
    for (const [name, opening] of [...this.cells]) {
      if (this.held.has(name)) continue;
      const cell = await opening.catch(() => undefined);
      const since = cell?.idleSince();
      if (cell === undefined || since === undefined || this.clock.now() - since < idleMs) continue;
      // Still the same cell and still idle after the await: nothing else reopened or used it.
      if (this.cells.get(name) !== opening || cell.idleSince() === undefined || this.held.has(name)) continue;
      this.forget(name, cell);
      await this.track(name, cell.close());
      closed.push(name);
    }
    return closed;
  }

  private armIdleSweep(idleMs: number): void {
    this.cancelIdleSweep = this.clock.schedule(this.clock.now() + Math.max(1000, idleMs / 2), () => {
      void this.closeIdle(idleMs)
        .catch((error: unknown) => this.options.onBackgroundError?.(error))
        .finally(() => {
          if (this.cancelIdleSweep !== undefined) this.armIdleSweep(idleMs);
        });
    });
  }

  /** The open cell for `name`, opening (and creating) it on first use. */
  open(name: string, config?: Partial<QueueConfig>): Promise<QueueCell> {
    if (this.closing) return Promise.reject(new CellError("ERR_CELL_CLOSED", `queue "${name}" is closed: every queue is closing`));
    const existing = this.cells.get(name);
    if (existing !== undefined) {
      // Most recently used last: the eviction below closes from the front.
      this.cells.delete(name);
      this.cells.set(name, existing);
      return config === undefined ? existing : existing.then(async (cell) => (await cell.configure(config), cell));
    }
    this.evictIdle();
    // A cell of this name still closing (evicted, or idle) finishes first: one connection a file.
    const opening = (this.closingCells.get(name) ?? Promise.resolve()).then(
      () =>
        new QueueCell({
          name,
          path: this.pathOf(name),
          clock: this.clock,
          notBeforeMs: this.closedAt.get(name),
          ids: this.ids,
          durability: this.options.durability ?? "full",
          config,
          resolveCell: (queue) => this.options.resolveElsewhere?.(queue) ?? this.openExisting(queue),
          onBackgroundError: this.options.onBackgroundError,
          onWarning: this.options.onWarning,
          observer: this.options.observe?.(name),
          syncFile: this.options.syncFile,
          onClosing: this.options.onCellClosing as ((cell: CellCore) => void) | undefined,
          onCommitted: this.options.onCellCommitted as ((cell: CellCore, counts: CellCounts | undefined) => void) | undefined,
        }),
    );
    this.cells.set(name, opening);
    opening.then(
      (cell) => {
        if (this.cells.get(name) === opening) this.opened.set(name, cell);
      },
      () => {
        if (this.cells.get(name) === opening) this.cells.delete(name);
      },
    );
    return opening;
  }

  /**
   * Keeps `name`'s cell open until the returned function is called: neither the idle sweep nor
   * the bound on open cells closes it. For a user that keeps the cell object (a consumer), which
   * a close would leave with a closed cell.
   */
  hold(name: string): () => void {
    this.held.set(name, (this.held.get(name) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.held.get(name) ?? 1) - 1;
      if (n === 0) this.held.delete(name);
      else this.held.set(name, n);
    };
  }

  /**
   * Makes room for one more cell under openCellsMax by closing the least recently used idle
   * cells, however briefly idle: each cell holds about five file descriptors and a few hundred
   * KB, and a host with thousands of queues ran out of descriptors (SQLITE_CANTOPEN for every
   * further queue, and refused connections) long before the idle sweep's minutes had passed.
   * Closes in the background; a reopen of the name waits for it (see open()).
   */
  private evictIdle(): void {
    let excess = this.cells.size + 1 - this.openCellsMax;
    if (excess <= 0) return;
    for (const name of [...this.cells.keys()]) {
      if (excess <= 0) break;
      const cell = this.opened.get(name);
      if (cell === undefined || this.held.has(name) || cell.idleSince() === undefined) continue;
      this.forget(name, cell);
      excess -= 1;
      this.track(name, cell.close()).catch((error: unknown) => this.options.onBackgroundError?.(error));
    }
  }

  /** Notes a close of `name` in closingCells until it ends, so a reopen of the name waits for it. */
  private track(name: string, closing: Promise<void>): Promise<void> {
    const settled = closing.then(
      () => undefined,
      () => undefined,
    );
    this.closingCells.set(name, settled);
    void settled.then(() => {
      if (this.closingCells.get(name) === settled) this.closingCells.delete(name);
    });
    return closing;
  }

  /** Drops `name` from the open cells; `closing`, a cell closed while idle, has its time kept for its reopening. */
  private forget(name: string, closing?: QueueCell): void {
    this.cells.delete(name);
    this.opened.delete(name);
    if (closing !== undefined) this.closedAt.set(name, closing.now());
  }

  /**
   * The cell for `name` if the queue exists (open, or its file on disk), else undefined: how a
   * dead-letter move finds its target. A move never creates a queue, or one deleted while its
   * messages were moving would come back as a file nobody lists, to be dropped with them later.
   */
  openExisting(name: string): Promise<QueueCell | undefined> {
    if (this.dropping.has(name)) return Promise.resolve(undefined);
    if (!this.cells.has(name) && !existsSync(this.pathOf(name))) return Promise.resolve(undefined);
    return this.open(name);
  }

  /** The cells open now (opening ones not yet among them), without touching their recency. */
  openCells(): QueueCell[] {
    return [...this.opened.values()];
  }

  /** Open cells, by name. */
  openNames(): string[] {
    return [...this.cells.keys()];
  }

  /** Every cell on disk, open or not (see CellDirectory.storedNames). */
  storedNames(): string[] {
    return this.directory.storedNames();
  }

  /** The queue files on disk and the bytes they take (see CellDirectory.diskUsage). */
  diskUsage(): { queues: number; bytes: number } {
    return this.directory.diskUsage();
  }

  /** Closes the cell if open and removes its files: every message of the queue is gone. */
  async drop(name: string): Promise<void> {
    // Until the files are gone: a move opening the file between the close and the removal would
    // commit into a file about to be unlinked under it.
    this.dropping.add(name);
    try {
      await this.close(name);
      const path = this.pathOf(name);
      for (const suffix of ["", "-wal", "-shm"]) rmSync(path + suffix, { force: true });
      this.closedAt.delete(name);
    } finally {
      this.dropping.delete(name);
    }
  }

  async close(name: string): Promise<void> {
    const cell = this.cells.get(name);
    if (cell === undefined) return void (await this.closingCells.get(name));
    this.forget(name);
    await (await cell.catch(() => undefined))?.close();
  }

  /**
   * Closes every cell. No cell opens while it runs (a dead-letter move finishing meanwhile would
   * open its target again, left open after the host let go of the data directory); once it has
   * resolved, every cell's background work has ended, and the registry may open cells again.
   */
  async closeAll(): Promise<void> {
    this.closing = true;
    const cancel = this.cancelIdleSweep;
    this.cancelIdleSweep = undefined;
    cancel?.();
    try {
      await Promise.all([...this.openNames().map((name) => this.close(name)), ...this.closingCells.values()]);
    } finally {
      this.closing = false;
    }
  }

  pathOf(name: string): string {
    return this.directory.pathOf(name);
  }
}
