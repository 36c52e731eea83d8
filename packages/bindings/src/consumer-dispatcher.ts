import {
  isCellError,
  limits,
  systemClock,
  type Clock,
  type LeasedMessage,
  type Cell,
  type SettleResult,
} from "@celld/queue-cell";
import { resolveBatchOutcome, type BatchSettlement, type QueueHandlerResult } from "./batch-outcome.ts";
import type { BatchMessage, BatchMetadata } from "./consumer-message.ts";
import {
  consumerHandlerWords,
  failedFate,
  retriedPastLastFate,
  retriedPastLastKind,
  type ConsumerFailureLog,
  type ConsumerKind,
} from "./consumer-failure-log.ts";
import { InFlightBudget } from "./in-flight-budget.ts";

export interface ConsumerSettings {
  queue: string;
  maxBatchSize: number;
  maxBatchTimeoutSeconds: number;
  maxConcurrency: number;
  retryDelaySeconds: number;
  /** How long one queue() invocation may run before it counts as a failed delivery. */
  wallTimeSeconds: number;
  /** How the consumer Worker is written, for what its lines call its handler; a module unless said. */
  consumer?: ConsumerKind;
}

/**
 * Runs the consumer script's queue() handler on one batch (in the host: through the queue
 * dispatch Worker, with Fetcher.queue). The messages are as leased, bodies still encoded: how
 * they reach the Worker is the invoker's business, and toConsumerMessage is how they must look
 * when they do. A rejection means no result came back: a BatchNotDeliveredError when the batch
 * certainly never reached workerd, anything else when it may have run (workerd died under it).
 * `signal` is aborted once the dispatcher has given up on the answer (the wall time passed, or the
 * host stopped): whatever the invocation holds open (a request, its connection) should go then.
 */
export type QueueInvoker = (
  queue: string,
  messages: readonly BatchMessage[],
  metadata: BatchMetadata,
  signal?: AbortSignal,
) => Promise<QueueHandlerResult>;

/**
 * What an invoker throws when the batch never reached the Worker (workerd refused the connection:
 * it is gone, or not started). No handler ran, so no delivery is counted.
 */
export class BatchNotDeliveredError extends Error {
  override readonly name = "BatchNotDeliveredError";
}

export interface DispatcherLog {
  info(message: string): void;
  warn(message: string): void;
  error(message: string, error?: unknown): void;
}

export interface BatchReport {
  queue: string;
  size: number;
  acked: number;
  retried: number;
  deadLettered: number;
  outcome: string;
  /** From the batch's start to its handler's end (or its wall time), on the dispatcher's clock. */
  durationMs: number;
  /** For each message acked, ms from its send to its ack, in the cell's time. */
  ackedAgesMs: number[];
}

export interface ConsumerDispatcherOptions {
  cell: Cell;
  /**
   * The queue's cell opened again, for a cell that closed while the dispatcher runs: one on a
   * worker thread that died (ThreadedCellRegistry opens it on a new thread). Without it, a closed
   * cell's refusals are lease failures like any other, and the consumer takes nothing more.
   */
  reopen?: () => Promise<Cell>;
  settings: ConsumerSettings;
  invoke: QueueInvoker;
  clock?: Clock;
  log?: DispatcherLog;
  /** Told after each batch is settled (tests and metrics). */
  onBatch?: (report: BatchReport) => void;
  /**
   * Recorded on every lease this dispatcher takes (LeaseOptions.owner), so that after a crash the
   * next start can end them at once (Cell.expireLeasesOf). 0 records nobody.
   */
  leaseOwner?: number;
  /**
   * Body bytes in unsettled batches, shared with the host's other consumers. Without one, the
   * dispatcher has a budget of its own of limits.consumerBatchBytesInFlightMax.
   */
  budget?: InFlightBudget;
  /**
   * Where a failed batch's line goes, so that a consumer failing every batch is told of once a
   * window, beside its error (the host's, shared with the handler shim's reports). Without one,
   * every failed batch has its line.
   */
  failures?: ConsumerFailureLog;
}

// A lease outlives the batch window and the wall time, so only a crashed host lets it run out;
// a live dispatcher settles or retries every message itself before then.
const leaseSlackSeconds = 60;

/** While delivery is paused, how often a dispatcher that can reopen its cell looks whether it closed. */
const closedWhilePausedCheckMs = 5_000;

/** The most full batches one turn of the dispatcher leases together under a backlog. */
const batchesPerLeaseMax = 4;

/** After a batch whose handler could not be run at all, the wait before the next, doubling. */
const unreachableBackoffMs = { first: 1_000, max: 30_000 } as const;

/**
 * After a lease the cell refused (its storage failed), the wait before the next, doubling; a lease
 * that works resets it. Without a wait a failing disk would be asked again in a tight loop.
 */
const leaseFailureBackoffMs = { first: 1_000, max: 30_000 } as const;

/** What one turn of leasing took, and the first lease that failed on the way, if one did. */
interface Collected {
  batch: LeasedMessage[];
  failure?: { error: unknown };
}

/**
 * Turns a queue's leases into queue() invocations: up to max_batch_size messages, delivered when
 * the batch is full or max_batch_timeout after its first message became available, with at most
 * max_concurrency batches running at once (fewer while the host's batches hold more message bytes
 * than their budget: see InFlightBudget). Each result is settled by the precedence rules of
 * resolveBatchOutcome; a handler that outlives the wall time counts as a failed delivery.
 */
export class ConsumerDispatcher {
  private cell: Cell;
  private readonly reopen: (() => Promise<Cell>) | undefined;
  private readonly settings: ConsumerSettings;
  private readonly invoke: QueueInvoker;
  private readonly clock: Clock;
  private readonly log: DispatcherLog;
  private readonly onBatch: ((report: BatchReport) => void) | undefined;
  private readonly leaseOwner: number;
  private readonly visibilitySeconds: number;
  private readonly budget: InFlightBudget;
  private readonly failures: ConsumerFailureLog | undefined;
  /** What the lines call the consumer's handler (consumerHandlerWords). */
  private readonly handler: string;
  private running = false;
  private abort = new AbortController();
  private loop: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  /** Batches handed to queue() and not yet settled; stop() hands back what is left here. */
  private readonly unsettled = new Set<LeasedMessage[]>();
  private stopping = false;
  private slotFreed: (() => void) | undefined;
  /** workerd exited under the host: what it was running when it died counts, even on stop. */
  private runtimeGone = false;
  /** 0 while invocations reach the Worker; else the wait after the last that could not. */
  private backoffMs = 0;
  /** 0 while leases work; else the wait after the last that failed. */
  private leaseBackoffMs = 0;
  /** No lease before this time: see backoffMs and leaseBackoffMs. */
  private pausedUntil = 0;
  /** One per invocation running; aborted when its answer is no longer awaited. */
  private readonly invocations = new Set<AbortController>();
  /** Body bytes a message in the batch started last: what a further full batch is judged by. */
  private lastBytesPerMessage: number | undefined;

  constructor(options: ConsumerDispatcherOptions) {
    this.cell = options.cell;
    this.reopen = options.reopen;
    this.settings = options.settings;
    this.invoke = options.invoke;
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? consoleLog;
    this.onBatch = options.onBatch;
    this.leaseOwner = options.leaseOwner ?? 0;
    this.budget = options.budget ?? new InFlightBudget(limits.consumerBatchBytesInFlightMax);
    this.failures = options.failures;
    this.handler = consumerHandlerWords[this.settings.consumer ?? "module"];
    this.failures?.consumedBy(this.settings.queue, this.settings.consumer ?? "module");
    this.visibilitySeconds = Math.min(
      limits.visibilityTimeoutSecondsMax,
      Math.ceil(this.settings.maxBatchTimeoutSeconds + this.settings.wallTimeSeconds + leaseSlackSeconds),
    );
  }

  get batchesInFlight(): number {
    return this.inFlight.size;
  }

  get queue(): string {
    return this.settings.queue;
  }

  get maxConcurrency(): number {
    return this.settings.maxConcurrency;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.abort = new AbortController();
    this.loop = this.run().catch((error: unknown) => {
      this.running = false;
      this.log.error(`consumer of queue "${this.settings.queue}" stopped`, error);
    });
  }

  /**
   * Stops taking batches. Running batches get `graceMs` to finish; what is still running then is
   * handed back to the queue unprocessed, ready at once and its delivery not counted.
   */
  async stop(graceMs = 0): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.abort.abort();
    this.slotFreed?.();
    await this.loop;
    if (this.inFlight.size > 0 && graceMs > 0) {
      await Promise.race([Promise.all(this.inFlight), new Promise((r) => setTimeout(r, graceMs).unref())]);
    }
    this.stopping = true;
    const cutShort = [...this.unsettled];
    if (cutShort.length > 0) {
      const messages = cutShort.reduce((sum, batch) => sum + batch.length, 0);
      this.log.info(
        `queue "${this.settings.queue}": ${messages} message(s) still in queue() handlers at shutdown handed back, ` +
          "their delivery not counted",
      );
    }
    await Promise.all(cutShort.map((batch) => this.releaseBatch(batch)));
    // Their batches are back in the queue: nothing waits for these answers any more, and a request
    // left open would hold its connection until workerd answered, if ever.
    const stopped = new Error(`the consumer of queue "${this.settings.queue}" stopped`);
    for (const invocation of this.invocations) invocation.abort(stopped);
  }

  /**
   * Told when workerd has exited under the host (not stopped by it). A batch it was running may be
   * what brought it down, so a failure of such a batch counts as a delivery even if the host is
   * stopping by then; otherwise a message that crashes workerd would never reach its dead-letter
   * queue. (On Ctrl-C, which reaches workerd too, batches cut short are handed back uncounted.)
   */
  runtimeExited(): void {
    this.runtimeGone = true;
  }

  /**
   * Told when the host has started workerd again after it exited: the next batch goes at once
   * rather than after the wait that batches failing to reach the gone workerd built up, and a
   * shutdown from now on hands back what it cuts short uncounted, as before the exit.
   */
  runtimeRestarted(): void {
    this.runtimeGone = false;
    this.backoffMs = 0;
    this.pausedUntil = 0;
    this.slotFreed?.();
  }

  private async run(): Promise<void> {
    while (this.running) {
      // Not during a wait after a failed lease (or reopen): that wait comes first.
      if (this.cell.isClosed && this.pausedUntil <= this.clock.now() && (await this.reopenedClosedCell())) continue;
      if (this.inFlight.size >= this.settings.maxConcurrency) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        continue;
      }
      if (this.cell.queueConfig.deliveryPaused) {
        // Delivery is paused (wrangler queues pause-delivery): no batch starts until it resumes;
        // running ones finish. stop() ends the wait too. A cell on a worker thread tells a pause
        // or resume (onDeliveryPausedChange) before it answers the configure that made it, so its
        // mirror of queueConfig is current here, and a resume after this look still wakes the wait.
        await new Promise<void>((resolve) => {
          // A cell that closes while paused (its worker thread died) never tells the resume,
          // which reaches the cell opened in its place: with reopen, the loop looks again now and then.
          const ends: Array<() => void> = [];
          const done = (): void => {
            for (const end of ends) end();
            resolve();
          };
          ends.push(this.cell.onDeliveryPausedChange(done));
          if (this.reopen !== undefined) ends.push(this.clock.schedule(this.clock.now() + closedWhilePausedCheckMs, done));
          this.slotFreed = done;
        });
        continue;
      }
      if (this.pausedUntil > this.clock.now()) {
        // The last invocation never reached the handler, or the last lease failed: wait before
        // leasing again (stop() and batches settling end the wait early; the loop then looks again).
        await new Promise<void>((resolve) => {
          const cancel = this.clock.schedule(this.pausedUntil, resolve);
          this.slotFreed = () => {
            cancel();
            resolve();
          };
        });
        continue;
      }
      if (this.inFlight.size > 0 && this.budget.full) {
        // Woken by a batch of its own settling (and by stop()), or by room another consumer gave.
        await new Promise<void>((resolve) => {
          this.slotFreed = resolve;
          this.budget.whenRoom(resolve);
        });
        continue;
      }
      const { batch, failure } = await this.collectBatches();
      if (batch.length > 0) {
        if (!this.running) {
          await this.releaseBatch(batch);
          break;
        }
        if (this.pausedUntil > this.clock.now() || this.cell.queueConfig.deliveryPaused) {
          // A batch failed to reach the handler while this one was being leased (quite likely the
          // very messages it handed back), or delivery was paused meanwhile: it goes back too,
          // uncounted, and the loop waits out the pause.
          await this.releaseBatch(batch);
        } else {
          // Also when another lease of this turn failed: these messages are leased, and left alone
          // they would wait out the lease and lose an attempt that no handler saw.
          this.startDelivery(batch);
        }
      }
      if (failure === undefined) this.leaseBackoffMs = 0;
      else if (this.running && !(await this.reopenedClosedCell())) this.leaseFailed(failure.error);
    }
  }

  /**
   * After a failed lease: if the cell has closed under the running dispatcher (its worker thread
   * died; a local cell the host holds closes only when the host stops it), the queue's cell opened
   * again. The messages leased from the old one settle on the new: their leases are in the file.
   * True when it was opened again, so the loop leases at once.
   */
  private async reopenedClosedCell(): Promise<boolean> {
    if (this.reopen === undefined || !this.cell.isClosed) return false;
    try {
      this.cell = await this.reopen();
    } catch (error) {
      this.leaseFailed(error);
      return true;
    }
    this.log.info(`queue "${this.settings.queue}": its cell closed under the consumer (a cell thread ended?); opened again`);
    return true;
  }

  /** Logs a refused lease and pauses leasing: a cell whose storage fails is not asked again at once. */
  private leaseFailed(error: unknown): void {
    this.leaseBackoffMs = nextBackoffMs(this.leaseBackoffMs, leaseFailureBackoffMs);
    this.pausedUntil = Math.max(this.pausedUntil, this.clock.now() + this.leaseBackoffMs);
    this.logFailure(
      `queue "${this.settings.queue}": could not take the next batch from the queue; trying again in ${this.leaseBackoffMs / 1000} s`,
      error,
    );
  }

  /**
   * A storage failure (a full disk) is the operator's matter, and its message names the cause: one
   * line, as the host logs the cell's own, rather than a stack at every retry. Anything else may
   * be a bug, and keeps its stack.
   */
  private logFailure(message: string, error: unknown): void {
    if (isCellError(error, "ERR_STORAGE")) this.log.error(`${message}: ${error.message}`);
    else this.log.error(message, error);
  }

  private startDelivery(batch: LeasedMessage[]): void {
    const bytes = batch.reduce((sum, m) => sum + m.body.byteLength, 0);
    this.budget.take(bytes);
    this.lastBytesPerMessage = bytes / batch.length;
    const delivery = this.deliver(batch).finally(() => {
      this.budget.give(bytes);
      this.inFlight.delete(delivery);
      this.slotFreed?.();
    });
    this.inFlight.add(delivery);
  }

  /**
   * The next batch (collectBatch's). With a backlog of full batches ready, up to
   * batchesPerLeaseMax - 1 more full ones are leased beside it, each started as it comes back.
   * Their leases reach the cell together, so they share one group and one flush: one lease at a
   * time takes one batch per flush, slower than producers fill a queue. Extra batches are taken
   * only where a slot is free, and while the in-flight budget has room for them, judged by the
   * last batch's bytes a message (none before a first batch has given a size).
   */
  private async collectBatches(): Promise<Collected> {
    const size = this.settings.maxBatchSize;
    let extra: number;
    try {
      extra = this.extraBatches();
    } catch (error) {
      return { batch: [], failure: { error } };
    }
    // Asked first, so the cell serves them first: the batch below gets what they leave.
    const extras = Array.from({ length: extra }, () =>
      this.cell
        .lease({ max: size, visibilityTimeoutSeconds: this.visibilitySeconds, owner: this.leaseOwner })
        .then((taken) => this.startExtra(taken)),
    );
    // allSettled, not all: a failed extra lease must not drop the batch collectBatch holds.
    const [main, ...others] = await Promise.allSettled([this.collectBatch(), ...extras]);
    const failedExtra = others.find((r) => r.status === "rejected");
    if (main.status === "rejected") return { batch: [], failure: { error: main.reason } };
    const failure = main.value.failure ?? (failedExtra === undefined ? undefined : { error: failedExtra.reason });
    return { batch: main.value.batch, ...(failure === undefined ? {} : { failure }) };
  }

  /** How many full batches to lease beside the next (see collectBatches). */
  private extraBatches(): number {
    const size = this.settings.maxBatchSize;
    const slots = Math.min(batchesPerLeaseMax, this.settings.maxConcurrency - this.inFlight.size);
    const estimate = this.lastBytesPerMessage === undefined ? undefined : this.lastBytesPerMessage * size;
    if (estimate === undefined || slots <= 1) return 0;
    // A hint: a cell on a worker thread answers from a mirror that may lag one commit. A batch
    // leased too many comes back short and is handed back; one too few, the next turn leases.
    let extra = Math.max(0, Math.min(slots, Math.floor(this.cell.readyCount(slots * size) / size)) - 1);
    while (extra > 0 && this.budget.bytes + (extra + 1) * estimate > this.budget.maxBytes) extra -= 1;
    return extra;
  }

  /**
   * A batch leased beside the next: started if full. One that came back short (something else
   * leased from the cell meanwhile) is handed back, as is any while stopping or paused: a batch is
   * delivered full, or at the end of its window.
   */
  private async startExtra(taken: LeasedMessage[]): Promise<void> {
    const paused = this.pausedUntil > this.clock.now() || this.cell.queueConfig.deliveryPaused;
    if (taken.length === this.settings.maxBatchSize && this.running && !paused) {
      this.startDelivery(taken);
    } else if (taken.length > 0) {
      await this.releaseBatch(taken);
    }
  }

  /**
   * Leases until the batch is full or its window, from its first message's availability, ends.
   * Rejects only when its first lease fails (nothing is leased then); a later lease that fails
   * ends the batch early, with what it holds.
   */
  private async collectBatch(): Promise<Collected> {
    const size = this.settings.maxBatchSize;
    let batch = await this.cell.lease({
      max: size,
      visibilityTimeoutSeconds: this.visibilitySeconds,
      waitSeconds: limits.leaseWaitSecondsMax,
      signal: this.abort.signal,
      owner: this.leaseOwner,
    });
    if (batch.length === 0) return { batch };
    const windowEndsAt =
      Math.min(...batch.map((m) => m.availableAt)) + this.settings.maxBatchTimeoutSeconds * 1000;
    while (batch.length < size && this.running) {
      // availableAt is in the cell's time, which runs ahead of the clock after a restart on a
      // clock behind the queue's newest message (Cell.now).
      const remainingMs = windowEndsAt - this.cell.now();
      if (remainingMs <= 0) break;
      // fill: the rest of the batch in one lease, once it is all there or the window ends, rather
      // than a lease (and its writes) for every message that arrives meanwhile.
      let more: LeasedMessage[];
      try {
        more = await this.cell.lease({
          max: size - batch.length,
          visibilityTimeoutSeconds: this.visibilitySeconds,
          waitSeconds: Math.min(limits.leaseWaitSecondsMax, remainingMs / 1000),
          signal: this.abort.signal,
          fill: true,
          owner: this.leaseOwner,
        });
      } catch (error) {
        return { batch, failure: { error } };
      }
      batch = batch.concat(more);
    }
    return { batch };
  }

  /**
   * One batch, in four stages: invoke the handler within its wall time; hand the batch back if no
   * handler ran; settle what the handler decided (acks, retries); report the batch.
   */
  private async deliver(batch: LeasedMessage[]): Promise<void> {
    this.unsettled.add(batch);
    const run = await this.invokeWithinWallTime(batch);
    if (this.stopping || !this.unsettled.has(batch)) return;
    if (this.notDelivered(run)) {
      await this.handBack(batch, run);
      return;
    }
    if (run.result !== "failed") this.backoffMs = 0;
    this.unsettled.delete(batch);
    const settled = await this.settleBatch(batch, run);
    if (settled !== undefined) this.report(batch, run, settled);
  }

  /** The handler's run, ended at its wall time (the batch then counts as failed). */
  private async invokeWithinWallTime(batch: LeasedMessage[]): Promise<HandlerRun> {
    const { queue } = this.settings;
    let result: HandlerRun["result"];
    let failure: unknown;
    let cancelTimer = (): void => {};
    const invocation = new AbortController();
    this.invocations.add(invocation);
    const startedMs = this.clock.now();
    let durationMs = 0;
    try {
      const metrics = await this.cell.backlogMetrics();
      const metadata: BatchMetadata = {
        metrics: {
          backlogCount: metrics.backlogCount,
          backlogBytes: metrics.backlogBytes,
          ...(metrics.oldestMessageTimestamp > 0 ? { oldestMessageTimestamp: new Date(metrics.oldestMessageTimestamp) } : {}),
        },
      };
      const wallTime = new Promise<"wall-time">((resolve) => {
        cancelTimer = this.clock.schedule(this.clock.now() + this.settings.wallTimeSeconds * 1000, () => {
          // The batch counts as failed now; a request left open would hold its connection until
          // workerd answered, if ever.
          const seconds = this.settings.wallTimeSeconds;
          invocation.abort(new Error(`${this.handler} of queue "${queue}" ran past its wall time of ${seconds} s`));
          resolve("wall-time");
        });
      });
      result = await Promise.race([this.invoke(queue, batch, metadata, invocation.signal), wallTime]);
    } catch (error) {
      failure = error;
      result = "failed";
    } finally {
      durationMs = this.clock.now() - startedMs;
      cancelTimer();
      this.invocations.delete(invocation);
    }
    return { result, failure, durationMs };
  }

  /**
   * No handler ran: workerd is gone or not reachable, or shutting down took it with it (Ctrl-C
   * reaches it too). Not the messages' failure. (A batch that was running when workerd died
   * counts as delivered: it may be what killed it; see runtimeExited.)
   */
  private notDelivered(run: HandlerRun): boolean {
    return run.result === "failed" && (run.failure instanceof BatchNotDeliveredError || (!this.running && !this.runtimeGone));
  }

  /**
   * A batch no handler ran goes back uncounted. Counted as a failure, an outage would use up every
   * waiting message's retries in seconds and dead-letter or delete them unread; while running,
   * this consumer waits before its next batch instead.
   */
  private async handBack(batch: LeasedMessage[], run: HandlerRun): Promise<void> {
    const { queue } = this.settings;
    if (this.running) {
      // Set before the release: the loop's lease may be waiting, and would take them at once.
      this.backoffMs = nextBackoffMs(this.backoffMs, unreachableBackoffMs);
      this.pausedUntil = Math.max(this.pausedUntil, this.clock.now() + this.backoffMs);
    }
    await this.releaseBatch(batch);
    if (!this.running) {
      // Shutting down took workerd with it (Ctrl-C reaches it too): expected, no stack trace.
      this.log.info(`queue "${queue}": ${batch.length} message(s) in flight at shutdown handed back`);
      return;
    }
    this.log.error(
      `queue "${queue}": ${this.handler} could not be run; its ${batch.length} message(s) are back in the queue, ` +
        `their attempt not counted; the next batch in ${this.backoffMs / 1000} s`,
      run.failure,
    );
    this.onBatch?.({ queue, size: batch.length, acked: 0, retried: 0, deadLettered: 0, outcome: "failed", durationMs: run.durationMs, ackedAgesMs: [] });
  }

  /**
   * Acks and retries as the handler decided (all retried after a failure or the wall time), in one
   * settle. Undefined when it could not be written: told here, and the leases left to run out.
   */
  private async settleBatch(batch: LeasedMessage[], run: HandlerRun): Promise<SettledBatch | undefined> {
    const { queue } = this.settings;
    const { result } = run;
    const settlement: BatchSettlement<LeasedMessage> =
      typeof result === "string"
        ? { acks: [], retries: batch.map((message) => ({ message, delaySeconds: this.settings.retryDelaySeconds })) }
        : resolveBatchOutcome(batch, result, this.settings.retryDelaySeconds);
    // A leased message names its own lease (id and generation): the acks are the messages.
    try {
      const settled = await this.cell.settle({
        acks: settlement.acks,
        nacks: settlement.retries.map(({ message, delaySeconds }) => ({ id: message.id, leaseGeneration: message.leaseGeneration, delaySeconds })),
      });
      return { settlement, settled };
    } catch (error) {
      // Nothing of the settle was written (the cell's storage failed, or it closed). The leases
      // are left to run out rather than released: the handler did run, and a lease that runs out
      // counts as a failed delivery, so a message that keeps failing still reaches max_retries;
      // a release would hand the messages back as never delivered, and is a write to the same
      // storage that has just refused one.
      this.logFailure(
        `queue "${queue}": the outcome of ${this.handler} could not be recorded; its ${batch.length} message(s) ` +
          `stay leased until the lease ends, within ${this.visibilitySeconds} s, and then come back, that delivery counted as failed`,
        error,
      );
      const outcome = typeof result === "string" ? result : result.outcome;
      this.onBatch?.({ queue, size: batch.length, acked: 0, retried: 0, deadLettered: 0, outcome, durationMs: run.durationMs, ackedAgesMs: [] });
      return undefined;
    }
  }

  /** A line for a batch that failed or dead-lettered, and the batch's report (onBatch). */
  private report(batch: LeasedMessage[], run: HandlerRun, { settlement, settled }: SettledBatch): void {
    const { queue } = this.settings;
    const { result, failure } = run;
    // For the words of a line: a mirror one configure behind (a cell on a worker thread) would only
    // name the dead-letter queue the batch's messages went to just before the change.
    const deadLetter = this.cell.queueConfig.deadLetter;
    // Built only for a line: most batches succeed, and this runs for every one.
    const fate = (): string => failedFate(batch.length, settled, deadLetter);
    const warnFailed = (kind: string, line: string, about?: string): void => {
      if (this.failures === undefined) this.log.warn(line);
      else {
        const { acked, retried, deadLettered } = settled;
        this.failures.batchFailed({ queue, tag: batch[0]!.id, kind, about, line, size: batch.length, acked, retried, deadLettered, deadLetter });
      }
    };
    if (result === "failed") {
      this.log.error(
        `queue "${queue}": ${this.handler} did not answer (workerd may have ended while it ran) ` +
          `and counts as a failed delivery; ${fate()}`,
        failure,
      );
    } else if (result === "wall-time") {
      warnFailed(
        "wall-time",
        `queue "${queue}": ${this.handler} did not finish within ${this.settings.wallTimeSeconds} s ` +
          `and counts as a failed delivery; ${fate()}`,
      );
    } else if (result.outcome !== "ok") {
      warnFailed(result.outcome, `queue "${queue}": ${this.handler} ended with outcome "${result.outcome}"; ${fate()}`);
    } else if (settled.deadLettered > 0) {
      // The handler returned, but retry() on a last delivery moved or deleted messages: wrangler
      // dev warns of each, and without a line a deleted message would leave no trace at all.
      warnFailed(
        retriedPastLastKind,
        `queue "${queue}": ${this.handler} ${retriedPastLastFate(settled, deadLetter, this.cell.queueConfig.maxDeliveries - 1)}`,
        "retried messages past their last delivery",
      );
    }
    this.onBatch?.({
      queue,
      size: batch.length,
      acked: settled.acked,
      retried: settled.retried,
      deadLettered: settled.deadLettered,
      outcome: typeof result === "string" ? result : result.outcome,
      durationMs: run.durationMs,
      ackedAgesMs: this.onBatch === undefined ? [] : ackedAges(settlement.acks, settled, this.cell.now()),
    });
  }

  private async releaseBatch(batch: LeasedMessage[]): Promise<void> {
    this.unsettled.delete(batch);
    try {
      await this.cell.release(refsOf(batch));
    } catch (error) {
      // The cell is closing too; the leases run out and the messages come back then.
      this.log.warn(`queue "${this.settings.queue}": could not hand back ${batch.length} message(s): ${String(error)}`);
    }
  }
}

/** What one run of the handler came to (deliver's first stage). */
interface HandlerRun {
  result: QueueHandlerResult | "wall-time" | "failed";
  /** Why it failed, with `failed`. */
  failure: unknown;
  durationMs: number;
}

/** What the handler decided, and what the cell made of it (deliver's settle stage). */
interface SettledBatch {
  settlement: BatchSettlement<LeasedMessage>;
  settled: SettleResult;
}

/** Ages at ack of the acks the cell applied (a stale one was not). */
function ackedAges(acks: readonly LeasedMessage[], settled: SettleResult, nowMs: number): number[] {
  const stale = settled.staleLeases.length === 0 ? undefined : new Set(settled.staleLeases.map((ref) => ref.id));
  const ages: number[] = [];
  for (const message of acks) if (stale?.has(message.id) !== true) ages.push(Math.max(0, nowMs - message.sentAt));
  return ages;
}

function nextBackoffMs(currentMs: number, backoff: { readonly first: number; readonly max: number }): number {
  return currentMs === 0 ? backoff.first : Math.min(backoff.max, currentMs * 2);
}

function refsOf(batch: readonly LeasedMessage[]): Array<{ id: string; leaseGeneration: number }> {
  return batch.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration }));
}

const consoleLog: DispatcherLog = {
  info: (message) => console.log(`[celld] ${message}`),
  warn: (message) => console.warn(`[celld] ${message}`),
  error: (message, error) => console.error(`[celld] ${message}`, error ?? ""),
};
