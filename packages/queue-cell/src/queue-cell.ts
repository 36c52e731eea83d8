import {
  backlogMetricsOf,
  checkLeaseOptions,
  checkLeaseRef,
  checkSettleInput,
  countsOf,
  deadMessageOf,
  peekedMessageOf,
  type BacklogMetrics,
  type CellCounts,
  type DeadMessage,
  type LeaseOptions,
  type LeaseRef,
  type NackRef,
  type PeekedMessage,
  type ReplayRange,
  type SendResult,
  type SettleResult,
} from "./cell-calls.ts";
import { resolveQueueConfig, retentionWords, type QueueConfig } from "./cell-config.ts";
import { emptyTally, isEmptyTally, type CellObserver, type CellTally } from "./cell-observer.ts";
import type { Cell } from "./cell-surface.ts";
import { CellTime } from "./cell-time.ts";
import { systemClock, type Clock } from "./clock.ts";
import { DeadLetterMover, type DeadLetterTarget } from "./dead-letter-mover.ts";
import { BackgroundWorkError, CellError, checkRange, isCellError } from "./errors.ts";
import { UlidSource } from "./ids.ts";
import { LeaseWaiters, type ServeOutcome, type WaiterSpec } from "./lease-waiters.ts";
import { limits } from "./limits.ts";
import { checkSend, overloaded, type OutgoingMessage, type SendOptions, type SendTrace } from "./send-input.ts";
import { CallFailures } from "./storage-failure.ts";
import { MessageState, type CellStore, type LeasedMessage, type MessageHead, type NewMessage, type StoredMessage } from "./store.ts";
import { WriteLoop, type GroupFate, type SubmitOptions } from "./write-loop.ts";

const msPerSecond = 1000;
/**
 * Receipts of dead-letter moves are kept two of the longest retentions: the queue a message came
 * from may keep it (and so move it again) up to its own retention, whatever this queue's is.
 */
const receiptKeepMs = 2 * limits.retentionSecondsMax * msPerSecond;
// Expired leases and replays are read in slices, so no single query returns an unbounded list.
const expirySliceRows = 1000;
/**
 * Expired rows one group deletes: 300,000 swept at once held the event loop 1.7 s (measured here),
 * every queue and request of the host with it. A slice is a few tens of ms; the timer takes up
 * the rest at once, in groups of their own.
 */
const sweepSliceRows = 5000;
/**
 * Rows one group of a purge or a replay changes. Done in one group, purging 300,000 messages held
 * the event loop 0.9 s (14 s on a busy machine) and replaying them 1.9 s (measured here); sliced,
 * at most about 50 ms, and other queues' calls and the host's requests run between the groups.
 */
const bulkSliceRows = 5000;

/** What opening a store is given of its cell (see CellCoreOptions.store). */
export interface StoreContext {
  /** The cell's clock. */
  clock: Clock;
  /** Tells of the store's own background work that failed, naming the queue (onBackgroundError). */
  backgroundFailed(work: string, retry: string, error: unknown): void;
}

/** Opens a cell's store. A failure of its storage is ERR_STORAGE; anything else is a bug. */
export type OpenStore = (context: StoreContext) => CellStore;

export interface CellCoreOptions {
  /** The queue's name, as errors and dead-letter moves name it. */
  name: string;
  /** The store (it must pass the conformance suite), or how to open it. */
  store: CellStore | OpenStore;
  /** The store's file, if it has one: named when it is found damaged or misplaced. */
  file?: string;
  clock?: Clock;
  ids?: UlidSource;
  /**
   * A time this queue's cell already reached before (the registry's, for a cell it closed idle):
   * the cell's time starts no earlier, as it starts no earlier than its newest message's entry.
   */
  notBeforeMs?: number;
  /** Settings to apply (and persist) on open; unset ones keep their stored or default values. */
  config?: Partial<QueueConfig>;
  /**
   * Finds the cell a `{ kind: "queue" }` dead-letter policy names; undefined when there is no such
   * queue, and then the move keeps the messages in this queue's own dead-letter set.
   */
  resolveCell?: (queue: string) => Promise<DeadLetterTarget | undefined>;
  /**
   * Told about failures of background work (dead-letter moves, lease expiry, checkpoints): a
   * BackgroundWorkError naming the queue, the work and what comes next.
   */
  onBackgroundError?: (error: unknown) => void;
  /** Told, in words for an operator, when messages stay somewhere other than they were meant to go. */
  onWarning?: (message: string) => void;
  /** Told what each committed group did, and of refused sends (the host's metrics). */
  observer?: CellObserver;
  /** Told as close() begins (a registry on a worker thread tells the main thread's mirror). */
  onClosing?: (cell: CellCore) => void;
  /**
   * Told after each group has committed and its calls were answered (the same registry's mirror),
   * with the counts it left, read inside its transaction (undefined after a failed flush).
   */
  onCommitted?: (cell: CellCore, counts: CellCounts | undefined) => void;
}

/**
 * One queue: a durable single-writer store with fenced leases. Every mutation goes through one
 * write loop that commits concurrent calls together; a promise settles only after its commit.
 * It keeps the rules over any CellStore; QueueCell (sqlite-queue-cell.ts) opens SQLite for it.
 */
export class CellCore implements Cell {
  readonly name: string;
  private readonly store: CellStore;
  private readonly clock: Clock;
  private readonly ids: UlidSource;
  private readonly loop: WriteLoop;
  private readonly waiters: LeaseWaiters;
  /** Told when delivery is paused or resumed (onDeliveryPausedChange). */
  private readonly configListeners = new Set<(config: QueueConfig) => void>();
  private readonly resolveCell: ((queue: string) => Promise<DeadLetterTarget | undefined>) | undefined;
  private readonly onBackgroundError: (error: unknown) => void;
  private readonly onWarning: (message: string) => void;
  private readonly observer: CellObserver | undefined;
  private readonly onClosing: ((cell: CellCore) => void) | undefined;
  private readonly onCommitted: ((cell: CellCore, counts: CellCounts | undefined) => void) | undefined;
  /** The counts the group being answered left (only with onCommitted), for afterCommit. */
  private groupCounts: CellCounts | undefined;
  /** What the group being written did, told to the observer once it is durable. */
  private tally: CellTally = emptyTally();
  private config: QueueConfig;
  private producerCallsInFlight = 0;
  /** Time never goes back inside a cell, so entry times rise with seq (retention relies on it). */
  private readonly time: CellTime;
  private readyChanged = false;
  private movingAdded = false;
  private cancelTimer: (() => void) | undefined;
  private timerAtMs: number | undefined;
  private readonly mover: DeadLetterMover;
  private closed = false;
  /** How a failed call is told to its caller (storage-failure.ts). */
  private readonly failures: CallFailures;
  private lastActivityMs = 0;
  /** Expired rows remain that the sweep's slices have not reached yet (see sweepSliceRows). */
  private sweeping = false;
  /** Messages the retention sweep of the group being written deleted. */
  private sweptInGroup = 0;
  /** Messages deleted by retention, committed, and not yet told (see retentionSwept). */
  private sweptUntold = 0;
  /**
   * No lease expires and no row outlives retention before this time: a lower bound, lowered as
   * leases and rows are added and made exact by maintain(). -Infinity: not yet known.
   */
  private maintenanceDueAt = -Infinity;

  constructor(options: CellCoreOptions) {
    this.name = options.name;
    // The store is not there yet when opening it fails.
    this.failures = new CallFailures(this.name, options.file, () => (this.store as CellStore | undefined)?.failed !== undefined);
    this.onBackgroundError = options.onBackgroundError ?? (() => {});
    this.onWarning = options.onWarning ?? (() => {});
    this.observer = options.observer;
    this.onClosing = options.onClosing;
    this.onCommitted = options.onCommitted;
    // Before the store: its log is truncated after a quiet spell on this clock.
    this.clock = options.clock ?? systemClock;
    this.store = typeof options.store === "function" ? this.openStore(options.store) : options.store;
    this.ids = options.ids ?? new UlidSource();
    this.resolveCell = options.resolveCell;
    const { config, stored } = this.readConfig(options.config ?? {});
    this.config = config;
    this.time = new CellTime(this.clock, Math.max(this.store.newestEnqueuedAt() ?? 0, options.notBeforeMs ?? 0));
    // Read now, not at the first call: a clock behind is measured from the open.
    this.now();
    this.loop = this.newWriteLoop();
    this.waiters = new LeaseWaiters(this.time.clock, () => this.serveWaiters());
    this.mover = new DeadLetterMover({
      name: this.name,
      store: this.store,
      loop: this.loop,
      clock: this.clock,
      policy: () => this.config.deadLetter,
      resolveCell: this.resolveCell,
      isClosed: () => this.closed,
      onWarning: (message) => this.onWarning(message),
      backgroundFailed: (work, retry, error) => this.backgroundFailed(work, retry, error),
    });
    this.writeNameAndConfig(stored);
    // Moves interrupted by a crash resume; expiries that fell due while closed are applied.
    this.loop.submit(() => undefined).catch((error: unknown) => this.backgroundFailed("resuming its work after opening", "tried again with its next call", error));
  }

  /**
   * Opening, first stage: the stored settings with `given` applied, checked before anything is
   * written (a refused open leaves the file as it was, and closes it). `stored` is their JSON as
   * the file holds it, if it holds any.
   */
  private readConfig(given: Partial<QueueConfig>): { config: QueueConfig; stored: string | undefined } {
    try {
      this.checkStoredName();
      const stored = this.store.getMeta("config");
      const base = stored === undefined ? undefined : (JSON.parse(stored) as QueueConfig);
      const config = resolveQueueConfig(given, base, this.name);
      this.checkDeadLetterTarget(config);
      return { config, stored };
    } catch (error) {
      this.store.close();
      throw error;
    }
  }

  /** The cell's single writer, with what each group does before, at the end of and after it. */
  private newWriteLoop(): WriteLoop {
    return new WriteLoop({
      transaction: (fn) => {
        try {
          return this.store.transaction(fn);
        } catch (error) {
          // The group's expiries rolled back with it, but maintain() may already have moved the
          // bound past them: it is unknown again, so the next group looks.
          this.maintenanceDueAt = -Infinity;
          const failure = this.callFailed(error, "commit");
          this.waiters.groupFailed(failure);
          throw failure;
        }
      },
      writesHeld: () => this.store.writesHeld(),
      durable: (urgent) => this.store.durable(urgent)?.catch((error: unknown) => Promise.reject(this.callFailed(error, "flush"))),
      now: () => this.now(),
      beforeGroup: (nowMs) => {
        // In the clock's time, as the registry that closes idle cells reads it.
        this.lastActivityMs = this.time.toClockMs(nowMs);
        // A group that rolled back before its end swept nothing.
        this.sweptInGroup = 0;
        this.tally = emptyTally();
        this.maintain(nowMs);
      },
      endOfGroup: (nowMs) => this.endOfGroup(nowMs),
      afterCommit: (nowMs) => this.afterCommit(nowMs),
    });
  }

  /**
   * Opening, last stage: the queue's name and settings, written only when changed: a reopen that
   * wrote them again left a commit to flush and a log to checkpoint at close for every open of an
   * unchanged queue. A failed write closes the store.
   */
  private writeNameAndConfig(stored: string | undefined): void {
    try {
      const config = JSON.stringify(this.config);
      if (config !== stored || this.store.getMeta("name") !== this.name) {
        this.store.transaction(() => {
          this.store.setMeta("config", config);
          this.store.setMeta("name", this.name);
        });
      }
    } catch (error) {
      this.store.close();
      throw this.callFailed(error, "commit");
    }
  }

  get queueConfig(): QueueConfig {
    return this.config;
  }

  /** Producer calls between arrival and commit. */
  get inFlight(): number {
    return this.producerCallsInFlight;
  }

  /** Sends 1 to 100 messages; resolves with their ids once they are durable. */
  async send(messages: readonly OutgoingMessage[], options: SendOptions = {}): Promise<SendResult> {
    const ended = this.observer?.sendStarted();
    try {
      const result = await this.sendChecked(messages, options);
      ended?.(true);
      return result;
    } catch (error) {
      ended?.(false);
      if (error instanceof CellError) this.observer?.sendRefused(error.code);
      throw error;
    }
  }

  private async sendChecked(messages: readonly OutgoingMessage[], options: SendOptions): Promise<SendResult> {
    this.assertOpen();
    checkSend(messages, options);
    if (this.producerCallsInFlight >= limits.producerCallsInFlightMax) throw overloaded(this.name);
    this.producerCallsInFlight += 1;
    try {
      return await this.loop.submit((nowMs) => {
        const rows: NewMessage[] = messages.map((m) => {
          const delay = m.delaySeconds ?? options.delaySeconds ?? this.config.deliveryDelaySeconds;
          return {
            id: this.ids.next(nowMs),
            dueAt: nowMs + delay * msPerSecond,
            sentAt: m.sentAt ?? nowMs,
            enqueuedAt: nowMs,
            contentType: m.contentType,
            attributes: m.attributes ?? null,
            body: m.body,
          };
        });
        const ids = this.store.insert(rows);
        this.tally.sent += rows.length;
        this.maintenanceDueBy(nowMs + this.retentionMs);
        this.readyChanged = true;
        return { ids, metrics: this.metrics() };
      }, sendSubmit(options.trace));
    } finally {
      this.producerCallsInFlight -= 1;
    }
  }

  /**
   * Backlog figures as a Worker's send() and metrics() report them, from what has committed. Read
   * without a write-loop group: the totals are kept in memory, and a consumer asks once a batch.
   */
  async backlogMetrics(): Promise<BacklogMetrics> {
    this.assertOpen();
    return this.metrics();
  }

  /**
   * How many messages are ready to lease now, counted up to `atMost` (reading no further), from
   * what has committed. Read without a write-loop group: a consumer asks it to decide how many
   * batches to lease at once.
   */
  readyCount(atMost: number): number {
    this.assertOpen();
    checkRange("atMost", atMost, 1, Number.MAX_SAFE_INTEGER, { integer: true, unit: "messages" });
    return this.store.dueCount(this.now(), atMost);
  }

  /**
   * Leases up to `max` ready messages. Each lease counts a delivery and takes a new generation.
   * With `waitSeconds`, an empty queue answers as soon as a message is ready, or empty at the end.
   */
  async lease(options: LeaseOptions): Promise<LeasedMessage[]> {
    this.assertOpen();
    const { max, visibilitySeconds, waitSeconds, owner } = checkLeaseOptions(options, this.config.visibilityTimeoutSeconds);
    const visibilityMs = Math.round(visibilitySeconds * msPerSecond);
    // The wait runs from the call, not from when the first attempt's group committed.
    const deadlineMs = this.now() + Math.round(waitSeconds * msPerSecond);
    const waits = waitSeconds > 0 && options.signal?.aborted !== true;
    const spec: WaiterSpec = { max, visibilityMs, deadlineMs, signal: options.signal, fill: false, owner };
    if (waits && options.fill === true) {
      // Straight to waiting. A group serves it at once if it can be filled already; otherwise the
      // groups that make messages ready do, and the timer wakes it for delayed ones.
      const now = this.now();
      return this.waitForMessages({ ...spec, fill: true }, this.store.hasDue(now, max) ? now : null);
    }
    // A long poll with nothing to take goes straight to waiting: an attempt would cost a group and
    // its commit for nothing, and whatever group makes a message ready serves the waiters. An idle
    // consumer polls again after every message it is given. (With a lease expiry or the retention
    // sweep possibly due, the attempt is made: its group applies them first.)
    if (waits && this.now() < this.maintenanceDueAt) {
      const earliest = this.store.earliestReadyDueAt();
      if (earliest === null || earliest > this.now()) return this.waitForMessages(spec, earliest);
    }
    const first = await this.loop.submit((nowMs) => this.leaseNow(nowMs, spec));
    if (first.length > 0 || !waits || options.signal?.aborted === true) return first;
    return this.waitForMessages(spec);
  }

  /** `known`: the earliest ready row's visible time, when the caller has just read it. */
  private waitForMessages(spec: WaiterSpec, known?: number | null): Promise<LeasedMessage[]> {
    // A first attempt answered by close()'s last group: close() has answered the waiters already,
    // and one listed now would wait out its whole deadline.
    if (this.closed) return Promise.resolve([]);
    const earliest = known === undefined ? this.store.earliestReadyDueAt() : known;
    const waiting = this.waiters.add(spec);
    // A message may have become ready in the group that answered the first attempt, before this
    // waiter was listed; and a delayed one needs the timer to wake this waiter.
    if (earliest !== null && earliest <= this.now()) this.serveWaiters();
    else this.armTimer(this.now());
    return waiting;
  }

  /**
   * Ends now every lease that names `owner`, as if it had run out: each counts as a failed
   * delivery (dead-lettered after the last allowed one), and the message is ready at once. A host
   * calls this at start for its own consumer's owner: leases left by a host that died are known to
   * be dead, and their messages need not wait out the lease (15 minutes and more). Returns how
   * many leases it ended.
   */
  async expireLeasesOf(owner: number): Promise<number> {
    this.assertOpen();
    checkRange("owner", owner, 1, Number.MAX_SAFE_INTEGER, { integer: true });
    return this.loop.submit((nowMs) => {
      const ended = this.failLeasesInSlices(() => this.store.leasedBy(owner, expirySliceRows), () => nowMs, nowMs);
      this.tally.leasesExpired += ended;
      return ended;
    });
  }

  async ack(refs: readonly LeaseRef[]): Promise<SettleResult> {
    return this.settle({ acks: refs });
  }

  async nack(refs: readonly NackRef[]): Promise<SettleResult> {
    return this.settle({ nacks: refs });
  }

  /**
   * Acks and nacks in one commit. Each names the lease generation it holds; one that no longer
   * matches is not applied and comes back in `staleLeases`.
   */
  async settle(input: { acks?: readonly LeaseRef[]; nacks?: readonly NackRef[] }): Promise<SettleResult> {
    this.assertOpen();
    const { acks, nacks } = checkSettleInput(input);
    return this.loop.submit((nowMs) => {
      const result: SettleResult = { acked: 0, retried: 0, deadLettered: 0, staleLeases: [] };
      // liveHead's rule, in one statement: present, not dead-lettered, same generation. A ref
      // named twice is acked once; the repeat is stale, as it would be one at a time.
      const removed = this.store.removeHeld(acks);
      for (const ref of acks) {
        if (removed.get(ref.id) === ref.leaseGeneration) {
          removed.delete(ref.id);
          result.acked += 1;
        } else {
          result.staleLeases.push({ id: ref.id, leaseGeneration: ref.leaseGeneration });
        }
      }
      for (const ref of nacks) {
        const head = this.liveHead(ref);
        if (head === undefined) {
          result.staleLeases.push({ id: ref.id, leaseGeneration: ref.leaseGeneration });
        } else if (this.failDelivery(head, nowMs + (ref.delaySeconds ?? 0) * msPerSecond, nowMs)) {
          result.deadLettered += 1;
        } else {
          result.retried += 1;
        }
      }
      this.tally.acked += result.acked;
      this.tally.retried += result.retried;
      this.tally.staleAcksRefused += result.staleLeases.length;
      return result;
    });
  }

  /**
   * Hands leased messages back unprocessed: ready at once, and their delivery not counted. For a
   * consumer that leased but never started the work (it is shutting down, its client went away).
   */
  async release(refs: readonly LeaseRef[]): Promise<{ released: number; staleLeases: LeaseRef[] }> {
    this.assertOpen();
    refs.forEach((ref, i) => checkLeaseRef("refs", i, ref));
    return this.loop.submit((nowMs) => {
      const staleLeases: LeaseRef[] = [];
      let released = 0;
      for (const ref of refs) {
        const head = this.liveHead(ref);
        if (head === undefined || head.state !== MessageState.leased) {
          staleLeases.push({ id: ref.id, leaseGeneration: ref.leaseGeneration });
          continue;
        }
        this.store.unlease(head, nowMs);
        released += 1;
      }
      if (released > 0) this.readyChanged = true;
      return { released, staleLeases };
    });
  }

  /** Returns dead-lettered messages to ready with a fresh delivery count. */
  async replay(range: ReplayRange = {}): Promise<{ replayed: number }> {
    this.assertOpen();
    const fromMs = range.fromMs ?? 0;
    const toMs = range.toMs ?? Number.MAX_SAFE_INTEGER;
    checkRange("fromMs", fromMs, 0, Number.MAX_SAFE_INTEGER, { integer: true });
    checkRange("toMs", toMs, fromMs, Number.MAX_SAFE_INTEGER, { integer: true });
    // A slice a group (see bulkSliceRows), each group's commit in turn. Messages dead-lettered
    // after the first slice are not this call's: the range ends there.
    let endMs: number | undefined;
    let replayed = 0;
    for (;;) {
      const slice = await this.loop
        .submit((nowMs) => {
          endMs ??= Math.min(toMs, nowMs + 1);
          const heads = this.store.deadInRange(fromMs, endMs, bulkSliceRows);
          for (const head of heads) this.store.resetToReady(head, nowMs);
          if (heads.length > 0) this.readyChanged = true;
          this.tally.replayed += heads.length;
          return heads.length;
        })
        .catch((error: unknown) => {
          throw this.failures.slicedFailed(error, { doneMessages: replayed, sliceRows: bulkSliceRows, done: "replayed", repeat: "only what is still dead is replayed again" });
        });
      replayed += slice;
      if (slice < bulkSliceRows) return { replayed };
    }
  }

  /**
   * Deletes the dead-letter set (`dead`), or every message of the queue (`all`) except those
   * already on their way into a dead-letter queue: they belong to that queue now.
   */
  async purge(scope: "dead" | "all" = "all", cut?: { seqAtMost: number }): Promise<{ purged: number }> {
    this.assertOpen();
    const states = scope === "dead" ? [MessageState.dead] : [MessageState.ready, MessageState.leased, MessageState.dead];
    // A slice a group (see bulkSliceRows), until one finds nothing left; messages sent after the
    // first slice (or after `cut`, taken by purgeCut) are not this call's, or a steady producer
    // could keep it going for ever.
    let seqAtMost: number | undefined = cut?.seqAtMost;
    let purged = 0;
    for (;;) {
      const slice = await this.loop
        .submit(() => {
          seqAtMost ??= this.store.seqHighWater();
          const deleted = this.store.purge(states, { rows: bulkSliceRows, seqAtMost });
          this.tally.purged += deleted;
          return deleted;
        })
        .catch((error: unknown) => {
          throw this.failures.slicedFailed(error, { doneMessages: purged, sliceRows: bulkSliceRows, done: "deleted", repeat: "it deletes what is left" });
        });
      if (slice === 0) return { purged };
      purged += slice;
    }
  }

  /**
   * The cut of a purge that begins now: the last message sent so far (in the write loop, so a
   * send committed before it is below it and one committed after is above). A caller that must
   * finish an interrupted purge later (Cloudflare's purge status, across a restart) records it and
   * passes it to purge().
   */
  async purgeCut(): Promise<{ seqAtMost: number }> {
    this.assertOpen();
    return this.loop.submit(() => ({ seqAtMost: this.store.seqHighWater() }));
  }

  async counts(): Promise<CellCounts> {
    this.assertOpen();
    return this.loop.submit((nowMs) => countsOf(this.store, nowMs));
  }

  /**
   * The counts from what has committed, read without a write-loop group (as backlogMetrics is):
   * for a scrape of every open cell, which must not cost each a transaction.
   */
  committedCounts(): CellCounts {
    this.assertOpen();
    return countsOf(this.store, this.now());
  }

  /** A page of the dead-letter set, oldest first; pass the last `seq` as `afterSeq` for the next. */
  async listDead(options: { afterSeq?: number; limit?: number } = {}): Promise<DeadMessage[]> {
    this.assertOpen();
    const limit = checkRange("limit", options.limit ?? 100, 1, limits.deadPageMessagesMax, { integer: true });
    const after = options.afterSeq ?? 0;
    return this.loop.submit(() => this.store.listByState(MessageState.dead, after, limit).map(deadMessageOf));
  }

  /**
   * A page of the messages not leased, dead or moving: ready now or delayed, oldest first, read
   * without leasing them (no delivery counted, no generation taken). For an operator's look.
   */
  async peekReady(options: { afterSeq?: number; limit?: number } = {}): Promise<PeekedMessage[]> {
    this.assertOpen();
    const limit = checkRange("limit", options.limit ?? 100, 1, limits.deadPageMessagesMax, { integer: true });
    const after = options.afterSeq ?? 0;
    return this.loop.submit(() => this.store.listByState(MessageState.ready, after, limit).map(peekedMessageOf));
  }

  /**
   * Told each time delivery is paused or resumed (configure), so a consumer waiting out a pause
   * starts again at once. Returns the unsubscribe.
   */
  onDeliveryPausedChange(listener: (config: QueueConfig) => void): () => void {
    this.configListeners.add(listener);
    return () => this.configListeners.delete(listener);
  }

  /** Changes settings; they apply to later deliveries and are persisted. */
  async configure(input: Partial<QueueConfig>): Promise<QueueConfig> {
    this.assertOpen();
    const next = resolveQueueConfig(input, this.config, this.name);
    this.checkDeadLetterTarget(next);
    await this.loop.submit(() => this.store.setMeta("config", JSON.stringify(next)));
    // Only once it is durable: a failed commit leaves the old settings in force, as on disk.
    const before = this.config;
    this.config = next;
    if (next.retentionSeconds < before.retentionSeconds) {
      // Messages past the new retention go from now on: the next group sweeps them.
      this.maintenanceDueAt = -Infinity;
      await this.loop.submit(() => undefined);
    }
    if (next.deliveryPaused !== before.deliveryPaused) for (const listener of [...this.configListeners]) listener(next);
    return next;
  }

  /**
   * Runs the time-driven work now: lease expiry, retention, serving waiting leases. A timer calls
   * it in production; a test calls it after moving its clock.
   */
  async tick(): Promise<void> {
    if (this.closed) return;
    await this.loop.submit((nowMs) => {
      // A receipt's time is its message's entry into the queue it came from, whose own sweep ends
      // any repeat of the move one retention later, by that cell's time; the second retention
      // covers cells whose times differ (QueueCell.now after a restart on a slow clock).
      this.store.sweepReceivedBefore(nowMs - receiptKeepMs);
      // Delayed messages become ready by the passing of time alone, with no row changed.
      this.readyChanged = true;
    });
  }

  /** Accepts messages dead-lettered by another cell. Idempotent on message id. */
  async receiveDeadLetters(messages: readonly StoredMessage[]): Promise<number> {
    this.assertOpen();
    return this.loop.submit((nowMs) => {
      const rows: NewMessage[] = messages.map((m) => ({
        id: m.id,
        dueAt: nowMs,
        sentAt: m.sentAt,
        enqueuedAt: nowMs,
        movedFromEnqueuedAt: m.enqueuedAt,
        contentType: m.contentType,
        attributes: m.attributes,
        body: m.body,
      }));
      const inserted = this.store.insert(rows, { skipKnownIds: true });
      if (inserted.length > 0) {
        this.maintenanceDueBy(nowMs + this.retentionMs);
        this.readyChanged = true;
      }
      return inserted.length;
    });
  }

  /** Writes what is queued, answers waiting leases empty, and closes the store. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClosing?.(this);
    this.waiters.closeAll();
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    await this.loop.close();
    await this.mover.stop();
    this.store.close();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * The cell's time, ms: its clock's, but never going back (see CellTime). The times it hands
   * out (availableAt, leaseExpiresAt, sentAt) are in it, so a caller measuring from one of them
   * (a consumer's batch window) reads this, not the clock.
   */
  now(): number {
    return this.time.now();
  }

  /**
   * When the cell last did anything, if nothing is going on that needs it open: no call in
   * flight, no waiting lease, no lease to expire, no dead-letter move, no failed flush. Otherwise
   * undefined.
   * Delayed messages and retention need no open cell: the next open applies what fell due.
   */
  idleSince(): number | undefined {
    if (this.closed || this.loop.queued > 0 || this.producerCallsInFlight > 0) return undefined;
    // A cell whose flush failed stays open and refusing until celld restarts, as its errors say:
    // closed as idle, it would open again on the next call and take writes on the same disk.
    if (this.store.failed !== undefined) return undefined;
    if (this.waiters.size > 0 || this.mover.busy) return undefined;
    const totals = this.store.totals();
    if (totals.leased > 0 || totals.moving > 0) return undefined;
    return this.lastActivityMs;
  }

  // ---- inside the write loop ----

  /**
   * Lease expiry and retention, when either can be due: most groups skip both, which would
   * otherwise cost index walks on every commit.
   */
  private maintain(nowMs: number): void {
    if (nowMs < this.maintenanceDueAt) return;
    // An expired lease was a delivery that failed; the message is ready again from its end.
    this.tally.leasesExpired += this.failLeasesInSlices(() => this.store.expiredLeases(nowMs, expirySliceRows), (head) => head.dueAt, nowMs);
    const cutoffMs = nowMs - this.retentionMs;
    const swept = this.store.sweepEnqueuedBefore(cutoffMs, sweepSliceRows);
    this.sweptInGroup += swept;
    this.tally.expiredByRetention += swept;
    const due = this.store.dueTimes();
    const sweeping = due.oldestEnqueuedAt !== null && due.oldestEnqueuedAt <= cutoffMs;
    // Once the last slice is gone, what waits for a lease may take what the sweep left.
    if (this.sweeping && !sweeping) this.readyChanged = true;
    this.sweeping = sweeping;
    this.maintenanceDueAt = Math.min(
      due.nextLeaseExpiryAt ?? Infinity,
      due.oldestEnqueuedAt === null ? Infinity : due.oldestEnqueuedAt + this.retentionMs,
    );
  }

  private get retentionMs(): number {
    return this.config.retentionSeconds * msPerSecond;
  }

  /** Something new can fall due at `atMs` (a lease's end, a row's retention). */
  private maintenanceDueBy(atMs: number): void {
    if (atMs < this.maintenanceDueAt) this.maintenanceDueAt = atMs;
  }

  /**
   * Inside a group: fails the delivery of every lease `slice` returns, a slice of expirySliceRows
   * at a time until one comes back short, each message ready again at `readyAt`. Returns how many.
   */
  private failLeasesInSlices(
    slice: () => MessageHead[],
    readyAt: (head: MessageHead) => number,
    nowMs: number,
  ): number {
    let ended = 0;
    for (;;) {
      const heads = slice();
      for (const head of heads) this.failDelivery(head, readyAt(head), nowMs);
      ended += heads.length;
      if (heads.length < expirySliceRows) return ended;
    }
  }

  private leaseNow(nowMs: number, spec: Pick<WaiterSpec, "max" | "visibilityMs" | "owner">): LeasedMessage[] {
    // Expired rows are still there until the sweep's last slice: none may be delivered.
    if (this.sweeping) return [];
    const rows = this.store.lease(nowMs, spec.max, nowMs + spec.visibilityMs, spec.owner);
    if (rows.length > 0) this.maintenanceDueBy(nowMs + spec.visibilityMs);
    this.tally.delivered += rows.length;
    return rows;
  }

  /** The message if `ref` still holds it: present, not dead-lettered, same generation. */
  private liveHead(ref: LeaseRef): MessageHead | undefined {
    const head = this.store.head(ref.id);
    if (head === undefined || head.leaseGeneration !== ref.leaseGeneration) return undefined;
    if (head.state !== MessageState.leased && head.state !== MessageState.ready) return undefined;
    return head;
  }

  /**
   * A delivery failed (a nack, or a lease that ran out). On the last allowed delivery the message
   * is dead-lettered; otherwise it is ready again at `readyAtMs`. Returns whether it died.
   */
  private failDelivery(head: MessageHead, readyAtMs: number, nowMs: number): boolean {
    if (head.deliveries >= this.config.maxDeliveries) {
      this.deadLetter(head, nowMs);
      return true;
    }
    this.store.setState(head, MessageState.ready, readyAtMs);
    this.readyChanged = true;
    return false;
  }

  private deadLetter(head: MessageHead, nowMs: number): void {
    const policy = this.config.deadLetter;
    if (policy.kind === "delete") this.tally.deletedAfterLastRetry += 1;
    else this.tally.deadLettered += 1;
    if (policy.kind === "set") this.store.setState(head, MessageState.dead, nowMs);
    else if (policy.kind === "delete") this.store.remove(head);
    else {
      this.store.setState(head, MessageState.moving, nowMs);
      this.movingAdded = true;
    }
  }

  private metrics(): BacklogMetrics {
    return backlogMetricsOf(this.store);
  }

  // ---- after a commit ----

  private afterCommit(nowMs: number): void {
    if (this.closed) return;
    const counts = this.groupCounts;
    this.groupCounts = undefined;
    this.onCommitted?.(this, counts);
    if (this.movingAdded || (!this.mover.busy && this.store.totals().moving > 0)) {
      this.movingAdded = false;
      this.mover.start();
    }
    this.armTimer(nowMs);
  }

  /** At the end of a group: its waiting leases served, and what its sweep deleted told once it commits. */
  private endOfGroup(nowMs: number): GroupFate | undefined {
    const served = this.serveInGroup(nowMs);
    const swept = this.sweptInGroup;
    this.sweptInGroup = 0;
    const tally = this.tally;
    this.tally = emptyTally();
    const observed = this.observer !== undefined && !isEmptyTally(tally);
    // Read here, in the group's transaction: read after the commit, they cost SQLite a read
    // transaction of their own (its locks are system calls) for every group.
    const counts = this.onCommitted === undefined ? undefined : countsOf(this.store, nowMs);
    if (swept === 0 && !observed && served === undefined && counts === undefined) return undefined;
    return {
      committed: () => {
        this.groupCounts = counts;
        if (swept > 0) this.retentionSwept(swept);
        if (observed) this.observer!.committed(tally);
      },
      ...(served === undefined ? {} : { answer: served.committed }),
      failed: (error) => served?.failed(error),
    };
  }

  /**
   * Tells of messages deleted by retention, as on Cloudflare, but not silently: a consumer that
   * keeps failing with a long retry_delay, or a backlog no one consumes, loses them here. A sweep
   * of many rows runs in slices of a group each; it is told once, when its last slice is in.
   */
  private retentionSwept(messages: number): void {
    this.sweptUntold += messages;
    if (this.sweeping) return;
    const count = this.sweptUntold;
    this.sweptUntold = 0;
    this.onWarning(
      `queue "${this.name}": ${count} message${count === 1 ? "" : "s"} reached the ${retentionWords(this.config.retentionSeconds)} ` +
        "retention before being acknowledged and were deleted (dead letters kept in the queue's own set included)",
    );
  }

  /**
   * At the end of a group, inside its transaction: if anything may have become ready, waiting
   * leases take it in the same commit (the group's fate is theirs), rather than in a group of
   * their own after it.
   */
  private serveInGroup(nowMs: number): ServeOutcome | undefined {
    if (!this.readyChanged) return undefined;
    this.readyChanged = false;
    if (this.waiters.size === 0) return undefined;
    return this.waiters.serve(
      (w) => this.leaseNow(nowMs, w),
      (max) => this.store.hasDue(nowMs, max),
    );
  }

  /** A group that serves the waiters; a failure reaches them through their own promises. */
  private serveWaiters(): void {
    this.loop
      .submit(() => {
        this.readyChanged = true;
      })
      .catch(() => undefined);
  }

  /** One timer for the next thing that falls due: a delay, a lease expiry, retention. */
  private armTimer(nowMs: number): void {
    const nextVisibleAt = this.waiters.size > 0 ? this.store.nextVisibleAt(nowMs) : null;
    const earliest = Math.min(nextVisibleAt ?? Infinity, this.maintenanceDueAt);
    const at = earliest === Infinity ? undefined : Math.max(nowMs + 1, earliest);
    if (at === this.timerAtMs) return;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.timerAtMs = at;
    if (at === undefined) return;
    this.cancelTimer = this.time.clock.schedule(at, () => {
      this.cancelTimer = undefined;
      this.timerAtMs = undefined;
      void this.tick().catch((error: unknown) =>
        this.backgroundFailed("applying lease expiries and retention", "tried again with its next call", error),
      );
    });
  }

  /** Reports background work that failed and will be retried, naming this queue and the work. */
  private backgroundFailed(work: string, retry: string, error: unknown): void {
    this.onBackgroundError(new BackgroundWorkError(this.name, work, retry, error));
  }

  private checkDeadLetterTarget(config: QueueConfig): void {
    if (config.deadLetter.kind === "queue" && this.resolveCell === undefined) {
      throw new CellError(
        "ERR_INVALID",
        `queue "${this.name}" names dead-letter queue "${config.deadLetter.queue}" but has no way to reach other queues`,
        { field: "deadLetter.queue", value: config.deadLetter.queue },
      );
    }
  }

  /**
   * A store that cannot be opened (a full disk, a read-only file system) is a storage failure of
   * the call that opens the cell, not a bug: it comes out as ERR_STORAGE, and the next call tries
   * again. The store reports its backend's failures as ERR_STORAGE naming the file; anything else
   * is a bug and is thrown as it is.
   */
  private openStore(open: OpenStore): CellStore {
    try {
      return open({ clock: this.clock, backgroundFailed: (work, retry, error) => this.backgroundFailed(work, retry, error) });
    } catch (error) {
      throw isCellError(error, "ERR_STORAGE") ? this.callFailed(error, "commit") : error;
    }
  }

  /**
   * A file that holds another queue (copied or restored under this queue's file name by hand) is
   * refused before anything is written: opened, it would hand that queue's messages to this one's
   * consumers, and its name and settings would be overwritten with this queue's, hiding the mix-up.
   */
  private checkStoredName(): void {
    const stored = this.store.getMeta("name");
    if (stored === undefined || stored === this.name) return;
    throw this.callFailed(this.failures.misplacedFile(stored), "commit");
  }

  /** See CallFailures.failed. */
  private callFailed(error: unknown, step: "commit" | "flush"): unknown {
    return this.failures.failed(error, step);
  }

  private assertOpen(): void {
    if (this.closed) throw new CellError("ERR_CELL_CLOSED", `queue "${this.name}" is closed`);
  }
}

/** A send is a producer's call, answered first in its group (SubmitOptions.producer). */
function sendSubmit(trace: SendTrace | undefined): SubmitOptions {
  return trace === undefined ? producerCall : { producer: true, trace };
}

const producerCall: SubmitOptions = { producer: true };
