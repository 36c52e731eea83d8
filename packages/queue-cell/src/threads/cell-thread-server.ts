import { fdatasync } from "node:fs";
import type { MessagePort } from "node:worker_threads";
import type { CellCounts, SendResult } from "../cell-calls.ts";
import type { QueueConfig } from "../cell-config.ts";
import { emptyTally, type CellObserver, type CellTally } from "../cell-observer.ts";
import type { DeadLetterTarget } from "../dead-letter-mover.ts";
import { systemClock } from "../clock.ts";
import { CellError } from "../errors.ts";
import { CellRegistry } from "../registry.ts";
import type { QueueCell } from "../sqlite-queue-cell.ts";
import type { LeasedMessage, StoredMessage } from "../store.ts";
import type { SyncFile } from "../wal-sync.ts";
import { fromErrorData, toErrorData, type ErrorData } from "./error-transport.ts";
import { columnBuffers, fromColumns, isColumns, isRefColumns, leasedToColumns, refsFromColumns, sendResultToColumns } from "./message-columns.ts";
import { ownerOf } from "./owner-hash.ts";
import { isBatch, PortOutbox, type MessageBatch } from "./port-outbox.ts";
import type { CellHandle, CellMethod, CellMirror, CellThreadParameters, CellUpdate, FromThread, MirrorUpdate, RegistryMethod, ToThread } from "./protocol.ts";
import { readThreadCpu } from "./thread-cpu.ts";

/**
 * How long changes the main thread did not ask for (background groups: lease expiry, dead-letter
 * moves, retention) wait to be told, so that a busy cell tells them once for many groups.
 */
const updateDelayMs = 5;
/**
 * How often the counts of a cell with delayed messages are told again: time alone makes them
 * ready, with no group to say so.
 */
const delayedRefreshMs = 250;

const cellMethods: ReadonlySet<string> = new Set<CellMethod>([
  "send", "backlogMetrics", "lease", "expireLeasesOf", "ack", "nack", "settle", "release", "replay",
  "purge", "purgeCut", "counts", "listDead", "peekReady", "configure", "tick", "receiveDeadLetters", "close",
]);

/**
 * A cell thread's side: a plain CellRegistry on the shared data directory, serving the queues
 * whose names hash to this thread (ownerOf), and answering the main thread's calls by handle.
 * It keeps the main thread's mirrors of its cells current (CellUpdate) and forwards what the
 * host observes: tallies, flush times, background errors and warnings.
 */
export class CellThreadServer {
  private readonly registry: CellRegistry;
  private readonly cells = new Map<number, QueueCell>();
  private readonly handles = new Map<QueueCell, number>();
  /** The handle of each name's latest cell, for tallies told after it closed. */
  private readonly latestHandle = new Map<string, number>();
  private nextHandle = 1;
  private readonly changed = new Set<string>();
  /** The counts the latest group of each changed cell left, read in its transaction (CellCore.onCommitted). */
  private readonly groupCounts = new Map<string, CellCounts>();
  /** The settings last told of each handle's cell: an update carries them only when they changed. */
  private readonly toldConfig = new Map<number, QueueConfig>();
  private readonly tallies = new Map<string, CellTally>();
  private syncSeconds: number[] = [];
  private updateTimer: NodeJS.Timeout | undefined;
  private readonly aborts = new Map<number, AbortController>();
  private readonly holds = new Map<number, () => void>();
  private readonly requests = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void }>();
  private nextRequest = 1;
  /** What this thread tells the main thread, a turn's messages posted as one (PortOutbox). */
  private readonly outbox: PortOutbox<FromThread>;

  constructor(
    private readonly port: MessagePort,
    private readonly parameters: CellThreadParameters,
  ) {
    this.registry = new CellRegistry({
      dataDir: parameters.dataDir,
      durability: parameters.durability,
      idleCloseMs: parameters.idleCloseMs,
      openCellsMax: parameters.openCellsMax,
      onBackgroundError: (error) => this.post({ kind: "backgroundError", error: toErrorData(error) }),
      onWarning: (message) => this.post({ kind: "warning", message }),
      observe: (name) => this.observerFor(name),
      ...(parameters.forwardSyncTimes ? { syncFile: this.timedSync } : {}),
      resolveElsewhere: (name) => (ownerOf(name, parameters.threads) === parameters.thread ? undefined : this.remoteTarget(name)),
      onCellClosing: (cell) => this.closing(cell),
      onCellCommitted: (cell, counts) => this.committed(cell, counts),
    });
    this.outbox = new PortOutbox<FromThread>(
      (message, transfer) => port.postMessage(message, transfer),
      (message, error) => this.undeliverable(message, error),
      // After the group's deferred answers (a producer's send is answered first): see PortOutbox.
      (post) => setImmediate(post),
    );
    port.on("message", (message: ToThread | MessageBatch<ToThread>) => {
      if (!isBatch(message)) return this.receive(message);
      for (const one of message.messages) this.receive(one);
    });
    setInterval(() => this.refreshDelayed(), delayedRefreshMs).unref();
  }

  private receive(message: ToThread): void {
    switch (message.kind) {
      case "call":
        void this.call(message);
        return;
      case "cancel":
        this.aborts.get(message.id)?.abort();
        return;
      case "registry":
        void this.registryCall(message.id, message.method, message.args);
        return;
      case "hold":
        this.holds.set(message.hold, this.registry.hold(message.name));
        return;
      case "unhold":
        this.holds.get(message.hold)?.();
        this.holds.delete(message.hold);
        return;
      case "answer": {
        const request = this.requests.get(message.id);
        this.requests.delete(message.id);
        if (message.ok) request?.resolve(message.value);
        else request?.reject(message.error);
        return;
      }
    }
  }

  private async call(message: Extract<ToThread, { kind: "call" }>): Promise<void> {
    const { id, handle, method, args } = message;
    const cell = this.cells.get(handle);
    try {
      if (!cellMethods.has(method)) throw new TypeError(`no cell method "${method}"`);
      // Closed since the main thread sent the call (idle, evicted): refused as a closed cell's.
      if (cell === undefined) throw new CellError("ERR_CELL_CLOSED", `queue "${message.name}" is closed`);
      if (message.abortable === true) args[0] = { ...(args[0] as object), signal: this.abortFor(id, message) };
      refsFromArgs(method, args);
      if (method === "send" && isColumns(args[0])) args[0] = fromColumns(args[0]);
      else if (method === "send" || method === "receiveDeadLetters") asBufferBodies(args[0] as Array<{ body: Uint8Array }>);
      const answer = await (cell[method] as (...a: unknown[]) => Promise<unknown>)(...args);
      const value = method === "lease" ? leasedToColumns(answer as LeasedMessage[]) : method === "send" ? sendResultToColumns(answer as SendResult) : answer;
      this.post({ kind: "answer", id, ok: true, value, update: this.takeUpdate(cell.name) }, columnBuffers(value));
    } catch (error) {
      this.post({ kind: "answer", id, ok: false, error: toErrorData(error), update: cell === undefined ? undefined : this.takeUpdate(cell.name) });
    } finally {
      this.aborts.delete(id);
    }
  }

  private abortFor(id: number, message: Extract<ToThread, { kind: "call" }>): AbortSignal {
    const controller = new AbortController();
    this.aborts.set(id, controller);
    if (message.aborted === true) controller.abort();
    return controller.signal;
  }

  private async registryCall(id: number, method: RegistryMethod, args: unknown[]): Promise<void> {
    try {
      const value = await this.runRegistry(method, args);
      this.post({ kind: "answer", id, ok: true, value });
    } catch (error) {
      this.post({ kind: "answer", id, ok: false, error: toErrorData(error) });
    }
  }

  private async runRegistry(method: RegistryMethod, args: unknown[]): Promise<unknown> {
    const name = args[0] as string;
    switch (method) {
      case "open":
        return this.handleOf(await this.registry.open(name, args[1] as Parameters<CellRegistry["open"]>[1]));
      case "openExisting": {
        const cell = await this.registry.openExisting(name);
        return cell === undefined ? undefined : this.handleOf(cell);
      }
      case "drop":
        return this.registry.drop(name);
      case "close":
        return this.registry.close(name);
      case "closeIdle":
        return this.registry.closeIdle(args[0] as number);
      case "closeAll":
        await this.registry.closeAll();
        this.flushUpdates();
        return undefined;
      case "threadCpu":
        return readThreadCpu();
    }
  }

  /** The handle of `cell`, made at its first open: one per cell object, as the main thread's RemoteCell is. */
  private handleOf(cell: QueueCell): CellHandle {
    let handle = this.handles.get(cell);
    if (handle === undefined) {
      handle = this.nextHandle++;
      this.handles.set(cell, handle);
      this.cells.set(handle, cell);
      this.latestHandle.set(cell.name, handle);
      const told = handle;
      cell.onDeliveryPausedChange(() => this.post({ kind: "pausedChange", handle: told, mirror: this.fullMirror(told, cell) }));
    }
    this.changed.delete(cell.name);
    return { handle, name: cell.name, mirror: this.fullMirror(handle, cell) };
  }

  private fullMirror(handle: number, cell: QueueCell): CellMirror {
    const mirror = mirrorOf(cell);
    this.toldConfig.set(handle, mirror.config);
    return mirror;
  }

  private closing(cell: QueueCell): void {
    const handle = this.handles.get(cell);
    if (handle === undefined) return;
    this.handles.delete(cell);
    this.cells.delete(handle);
    this.toldConfig.delete(handle);
    this.post({ kind: "closing", handle });
  }

  /**
   * A group of `cell` committed: its mirror is told with the next answer of a call of its (the
   * caller's own call, most often, answered just before this), or after updateDelayMs for a
   * group nobody on the main thread waits on (lease expiry, a dead-letter move, retention).
   */
  private committed(cell: QueueCell, counts: CellCounts | undefined): void {
    this.changed.add(cell.name);
    if (counts === undefined) this.groupCounts.delete(cell.name);
    else this.groupCounts.set(cell.name, counts);
    this.armUpdate();
  }

  /**
   * The observer of a cell on this thread: it sums its tallies for the main thread's observer.
   * Sends are timed on the main thread (RemoteCell.send), where the producer waits, hop included,
   * and refused there (any CellError a send rejects with, as CellCore.send tells them).
   */
  private observerFor(name: string): CellObserver | undefined {
    if (!this.parameters.forwardTallies) return undefined;
    return {
      committed: (tally) => {
        const sum = this.tallies.get(name) ?? emptyTally();
        for (const key of Object.keys(tally) as Array<keyof CellTally>) sum[key] += tally[key];
        this.tallies.set(name, sum);
        this.armUpdate();
      },
      sendRefused: () => {},
      sendStarted: () => () => {},
    };
  }

  /** fs.fdatasync, timed, for the main thread's flush figures. */
  private readonly timedSync: SyncFile = (fd, done) => {
    const start = performance.now();
    fdatasync(fd, (error) => {
      if (error === null) {
        this.syncSeconds.push((performance.now() - start) / 1000);
        this.armUpdate();
      }
      done(error);
    });
  };

  /** What changed of `name`'s cell since it was last told, taken to be told now. */
  private takeUpdate(name: string): CellUpdate | undefined {
    const tally = this.tallies.get(name);
    const changed = this.changed.has(name);
    if (tally === undefined && !changed) return undefined;
    this.tallies.delete(name);
    this.changed.delete(name);
    const counts = this.groupCounts.get(name);
    this.groupCounts.delete(name);
    this.disarmIfTold();
    const handle = this.latestHandle.get(name) ?? 0;
    const cell = this.cells.get(handle);
    const mirror = cell === undefined ? undefined : this.mirrorUpdate(handle, cell, counts);
    return { handle, name, ...(mirror === undefined ? {} : { mirror }), ...(tally === undefined ? {} : { tally }) };
  }

  /** The mirror of `cell` for an update: its settings (a third of it) only if they changed. */
  private mirrorUpdate(handle: number, cell: QueueCell, counts: CellCounts | undefined): MirrorUpdate | undefined {
    const mirror = this.mirrorOrNone(cell, counts);
    if (mirror === undefined) return undefined;
    if (this.toldConfig.get(handle) !== mirror.config) {
      this.toldConfig.set(handle, mirror.config);
      return mirror;
    }
    const { config: _told, ...rest } = mirror;
    return rest;
  }

  /**
   * The mirror of `cell`, or none if it cannot be read (a store that failed under it): the main
   * side keeps the last one, and the failure reaches callers through their own calls. An error
   * thrown here, from a timer, would end the thread.
   */
  private mirrorOrNone(cell: QueueCell, counts?: CellCounts): CellMirror | undefined {
    try {
      return mirrorOf(cell, counts);
    } catch {
      return undefined;
    }
  }

  /**
   * Nothing left to tell (an answer carried it): the timer would wake the thread for nothing. A
   * busy cell's every group armed it, and each answer took what it was armed for.
   */
  private disarmIfTold(): void {
    if (this.updateTimer === undefined || this.changed.size > 0 || this.tallies.size > 0 || this.syncSeconds.length > 0) return;
    clearTimeout(this.updateTimer);
    this.updateTimer = undefined;
  }

  private armUpdate(): void {
    if (this.updateTimer !== undefined) return;
    this.updateTimer = setTimeout(() => this.flushUpdates(), updateDelayMs);
  }

  private flushUpdates(): void {
    clearTimeout(this.updateTimer);
    this.updateTimer = undefined;
    const names = new Set([...this.changed, ...this.tallies.keys()]);
    const updates = [...names].flatMap((name) => this.takeUpdate(name) ?? []);
    const syncSeconds = this.syncSeconds;
    this.syncSeconds = [];
    if (updates.length > 0 || syncSeconds.length > 0) this.post({ kind: "updates", updates, ...(syncSeconds.length > 0 ? { syncSeconds } : {}) });
  }

  private refreshDelayed(): void {
    for (const cell of this.cells.values()) {
      if (!cell.isClosed && (this.mirrorOrNone(cell)?.counts.delayed ?? 0) > 0) {
        // Time, not a group, moved them: a group's counts waiting to be told are out of date.
        this.groupCounts.delete(cell.name);
        this.changed.add(cell.name);
      }
    }
    if (this.changed.size > 0) this.armUpdate();
  }

  /** A dead-letter target owned by another thread: reached through the main thread, if the queue exists. */
  private async remoteTarget(name: string): Promise<DeadLetterTarget | undefined> {
    const exists = (await this.request({ method: "targetExists", name })) as boolean;
    if (!exists) return undefined;
    return {
      receiveDeadLetters: async (messages: readonly StoredMessage[]) =>
        (await this.request({ method: "receiveDeadLetters", name, messages: [...messages] })) as number,
    };
  }

  private request(
    body: { method: "targetExists"; name: string } | { method: "receiveDeadLetters"; name: string; messages: StoredMessage[] },
  ): Promise<unknown> {
    const id = this.nextRequest++;
    return new Promise((resolve, reject) => {
      this.requests.set(id, { resolve, reject: (data) => reject(fromErrorData(data as ErrorData)) });
      this.post({ kind: "request", id, ...body });
    });
  }

  private post(message: FromThread, transfer: ArrayBuffer[] = []): void {
    this.outbox.post(message, transfer);
  }

  /** An answer that could not be cloned is refused with why, rather than left unanswered. */
  private undeliverable(message: FromThread, error: unknown): void {
    if (message.kind !== "answer") throw error;
    this.port.postMessage({ kind: "answer", id: message.id, ok: false, error: toErrorData(error), update: message.update });
  }
}

/** Refs that crossed as columns (RemoteCell's ack, nack, settle, release), as objects again. */
function refsFromArgs(method: CellMethod, args: unknown[]): void {
  if (method === "settle" && typeof args[0] === "object" && args[0] !== null) {
    const input = args[0] as { acks?: unknown; nacks?: unknown };
    if (isRefColumns(input.acks)) input.acks = refsFromColumns(input.acks);
    if (isRefColumns(input.nacks)) input.nacks = refsFromColumns(input.nacks);
  } else if (isRefColumns(args[0])) {
    args[0] = refsFromColumns(args[0]);
  }
}

/** `counts`: those a group just left, read in its transaction; else read now. */
function mirrorOf(cell: QueueCell, counts?: CellCounts): CellMirror {
  return { config: cell.queueConfig, counts: counts ?? cell.committedCounts(), nowOffsetMs: cell.now() - systemClock.now(), idleSince: cell.idleSince() };
}

/**
 * Bodies arrive as plain Uint8Arrays (a structured clone does not keep Buffer); the store binds
 * them to SQLite as Buffers. A view over the same memory: nothing is copied.
 */
function asBufferBodies(messages: Array<{ body: Uint8Array }>): void {
  if (!Array.isArray(messages)) return;
  for (const m of messages) {
    if (m !== null && typeof m === "object" && m.body instanceof Uint8Array && !Buffer.isBuffer(m.body)) {
      m.body = Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength);
    }
  }
}
