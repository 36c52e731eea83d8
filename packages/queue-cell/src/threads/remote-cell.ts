import type {
  BacklogMetrics,
  CellCounts,
  DeadMessage,
  LeaseOptions,
  LeaseRef,
  NackRef,
  PeekedMessage,
  ReplayRange,
  SendResult,
  SettleResult,
} from "../cell-calls.ts";
import type { QueueConfig } from "../cell-config.ts";
import type { CellObserver } from "../cell-observer.ts";
import type { Cell } from "../cell-surface.ts";
import { systemClock } from "../clock.ts";
import { CellError, checkRange } from "../errors.ts";
import type { OutgoingMessage, SendOptions } from "../send-input.ts";
import type { LeasedMessage, StoredMessage } from "../store.ts";
import { leasedFromColumns, refsToColumns, sendResultFromColumns, toColumns, type LeasedColumns, type SendResultColumns } from "./message-columns.ts";
import type { CellMethod, CellMirror, MirrorUpdate } from "./protocol.ts";

/** How a RemoteCell reaches its thread (ThreadLink). */
export interface CellCalls {
  call(cell: RemoteCell, method: CellMethod, args: unknown[], signal?: AbortSignal): Promise<unknown>;
}

/**
 * A cell that runs on a cell thread, as the main thread's users reach it: every async member is a
 * call to the thread; the synchronous ones answer from a mirror the thread keeps current (with
 * every answer that changed the cell, and within a few ms of changes nobody asked for). Where a
 * mirror lags, it lags by one message, and its users take it as a hint:
 * - `readyCount`: the consumer dispatcher decides how many batches to lease at once; a lease of
 *   one batch too many answers empty, one too few is made up by the next round.
 * - `committedCounts`, `queueConfig.deliveryPaused`: a metrics scrape and the dashboard, which
 *   show a moment anyway; the API's paused check, which a configure that answered has updated.
 * - `idleSince`: only the thread's own registry decides on idleness, from the cell itself.
 * - `now`: the thread's cell time is the clock plus an offset (see CellTime), which the mirror
 *   carries against systemClock, which a cell thread reads from the main thread's origin
 *   (adoptSystemClockOrigin): it is the thread's own time, not a hint.
 * `inFlight` and `isClosed` are kept here: sends are counted from call to answer, hop included,
 * and a close is known at once (the thread tells one it made itself: idle, evicted, dropped).
 */
export class RemoteCell implements Cell {
  private mirror: CellMirror;
  private closed = false;
  private sendsInFlight = 0;
  private lastNow = 0;
  private readonly pausedListeners = new Set<(config: QueueConfig) => void>();

  constructor(
    private readonly calls: CellCalls,
    /** The thread's handle for the cell object this one stands for. */
    readonly handle: number,
    readonly name: string,
    mirror: CellMirror,
    private readonly observer: () => CellObserver | undefined,
  ) {
    this.mirror = mirror;
  }

  /** A newer mirror from the thread (its settings only if they changed). */
  updated(mirror: MirrorUpdate): void {
    this.mirror = { ...mirror, config: mirror.config ?? this.mirror.config };
  }

  /** Delivery was paused or resumed on the thread: told to the listeners as a local cell does. */
  pausedChanged(mirror: CellMirror): void {
    this.mirror = mirror;
    for (const listener of [...this.pausedListeners]) listener(mirror.config);
  }

  /** The thread closed the cell (idle, evicted, dropped, closed by name) or died. */
  markClosed(): void {
    this.closed = true;
  }

  get queueConfig(): QueueConfig {
    return this.mirror.config;
  }

  get inFlight(): number {
    return this.sendsInFlight;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** As CellCore.send, timed here (what a producer waits, the hop included). A trace cannot cross threads. */
  async send(messages: readonly OutgoingMessage[], options: SendOptions = {}): Promise<SendResult> {
    if (options.trace !== undefined) {
      throw new TypeError("SendOptions.trace is not taken by a cell on a worker thread: split a send's stages with cells on the main thread");
    }
    const observer = this.observer();
    const ended = observer?.sendStarted();
    this.sendsInFlight += 1;
    try {
      const result = sendResultFromColumns((await this.call("send", [toColumns(messages) ?? messages, options])) as SendResultColumns);
      ended?.(true);
      return result;
    } catch (error) {
      ended?.(false);
      if (error instanceof CellError) observer?.sendRefused(error.code);
      throw error;
    } finally {
      this.sendsInFlight -= 1;
    }
  }

  async backlogMetrics(): Promise<BacklogMetrics> {
    return (await this.call("backlogMetrics", [])) as BacklogMetrics;
  }

  readyCount(atMost: number): number {
    this.assertOpen();
    checkRange("atMost", atMost, 1, Number.MAX_SAFE_INTEGER, { integer: true, unit: "messages" });
    return Math.min(atMost, this.mirror.counts.ready);
  }

  async lease(options: LeaseOptions): Promise<LeasedMessage[]> {
    const { signal, ...rest } = options;
    return leasedFromColumns((await this.call("lease", [rest], signal)) as LeasedColumns);
  }

  async expireLeasesOf(owner: number): Promise<number> {
    return (await this.call("expireLeasesOf", [owner])) as number;
  }

  async ack(refs: readonly LeaseRef[]): Promise<SettleResult> {
    return (await this.call("ack", [refsToColumns(refs) ?? refs])) as SettleResult;
  }

  async nack(refs: readonly NackRef[]): Promise<SettleResult> {
    return (await this.call("nack", [refsToColumns(refs) ?? refs])) as SettleResult;
  }

  async settle(input: { acks?: readonly LeaseRef[]; nacks?: readonly NackRef[] }): Promise<SettleResult> {
    if (typeof input !== "object" || input === null) return (await this.call("settle", [input])) as SettleResult;
    const acks = input.acks === undefined ? undefined : (refsToColumns(input.acks) ?? input.acks);
    const nacks = input.nacks === undefined ? undefined : (refsToColumns(input.nacks) ?? input.nacks);
    return (await this.call("settle", [{ ...input, acks, nacks }])) as SettleResult;
  }

  async release(refs: readonly LeaseRef[]): Promise<{ released: number; staleLeases: LeaseRef[] }> {
    return (await this.call("release", [refsToColumns(refs) ?? refs])) as { released: number; staleLeases: LeaseRef[] };
  }

  async replay(range: ReplayRange = {}): Promise<{ replayed: number }> {
    return (await this.call("replay", [range])) as { replayed: number };
  }

  async purge(scope: "dead" | "all" = "all", cut?: { seqAtMost: number }): Promise<{ purged: number }> {
    return (await this.call("purge", cut === undefined ? [scope] : [scope, cut])) as { purged: number };
  }

  async purgeCut(): Promise<{ seqAtMost: number }> {
    return (await this.call("purgeCut", [])) as { seqAtMost: number };
  }

  async counts(): Promise<CellCounts> {
    return (await this.call("counts", [])) as CellCounts;
  }

  committedCounts(): CellCounts {
    this.assertOpen();
    return { ...this.mirror.counts };
  }

  async listDead(options: { afterSeq?: number; limit?: number } = {}): Promise<DeadMessage[]> {
    return withBufferBodies((await this.call("listDead", [options])) as DeadMessage[]);
  }

  async peekReady(options: { afterSeq?: number; limit?: number } = {}): Promise<PeekedMessage[]> {
    return withBufferBodies((await this.call("peekReady", [options])) as PeekedMessage[]);
  }

  onDeliveryPausedChange(listener: (config: QueueConfig) => void): () => void {
    this.pausedListeners.add(listener);
    return () => this.pausedListeners.delete(listener);
  }

  async configure(input: Partial<QueueConfig>): Promise<QueueConfig> {
    return (await this.call("configure", [input])) as QueueConfig;
  }

  async tick(): Promise<void> {
    if (this.closed) return;
    await this.call("tick", []);
  }

  async receiveDeadLetters(messages: readonly StoredMessage[]): Promise<number> {
    return (await this.call("receiveDeadLetters", [messages])) as number;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.calls.call(this, "close", []);
  }

  now(): number {
    // Never back, as CellTime: the offset may shrink when the system clock catches up.
    this.lastNow = Math.max(this.lastNow, systemClock.now() + this.mirror.nowOffsetMs);
    return this.lastNow;
  }

  idleSince(): number | undefined {
    return this.closed ? undefined : this.mirror.idleSince;
  }

  private call(method: CellMethod, args: unknown[], signal?: AbortSignal): Promise<unknown> {
    // Refused here as the thread's cell would refuse it: no need to cross for it.
    if (this.closed) return Promise.reject(this.closedError());
    return this.calls.call(this, method, args, signal);
  }

  private assertOpen(): void {
    if (this.closed) throw this.closedError();
  }

  private closedError(): CellError {
    return new CellError("ERR_CELL_CLOSED", `queue "${this.name}" is closed`);
  }
}

/**
 * Bodies arrive as plain Uint8Arrays (a structured clone does not keep Buffer); a local cell
 * answers Buffers, which callers may use as such. A view over the same memory: nothing is copied.
 */
function withBufferBodies<T extends { body: Uint8Array }>(messages: T[]): T[] {
  for (const m of messages) {
    if (!Buffer.isBuffer(m.body)) m.body = Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength);
  }
  return messages;
}
