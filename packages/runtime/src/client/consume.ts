import type { Clock } from "@celld/queue-cell";
import { limits } from "@celld/queue-cell/limits";
import { QueuesApiError } from "./errors.ts";
import type { LeasedMessage, LeaseOptions, LeaseRef, NackRef, SettleResult } from "./resources.ts";

export type ConsumeHandler = (message: LeasedMessage) => unknown;

export interface ConsumeOptions {
  /** Messages per lease. Default 10. */
  maxMessages?: number;
  /** Seconds each lease hides its messages; the queue's own setting when absent. */
  visibilityTimeout?: number;
  /** Long-poll seconds per lease. Default the most the API allows. */
  wait?: number;
  /** Seconds before a message whose handler threw may be leased again: a number, or per message. */
  retryDelay?: number | ((message: LeasedMessage, error: unknown) => number | undefined);
  /**
   * Told of handler errors (the message is nacked), failed settles and retried lease errors.
   * Should it (or `onStale`, or `retryDelay`) throw, the batch in hand is still settled, then the
   * loop ends and `done` rejects with what it threw.
   */
  onError?: (error: unknown, message?: LeasedMessage) => void;
  /**
   * Told of each message whose ack or nack came back stale: its lease ran out while the handler
   * worked and another lease has taken it, so it is (or will be) handled again. Not an error of
   * the call; a sign that `visibilityTimeout` is shorter than the handler takes.
   */
  onStale?: (message: LeasedMessage) => void;
  /**
   * Milliseconds to wait after a failed lease before the next, where the server named no wait
   * (its Retry-After is taken instead, up to a minute), and after an empty one when `wait` is 0.
   * Default 1000.
   */
  retryLeaseAfterMs?: number;
  /** Stops the loop when aborted, as stop() does. */
  signal?: AbortSignal;
}

export interface ConsumeStats {
  leased: number;
  acked: number;
  nacked: number;
  /** Settled after another worker had leased the message again: not applied. */
  stale: number;
}

export interface Consumer {
  /** Stops leasing, lets running handlers finish, settles their messages, then resolves. */
  stop(): Promise<ConsumeStats>;
  /** Resolves when the loop has stopped; rejects if it stopped on an error it cannot retry. */
  readonly done: Promise<ConsumeStats>;
  readonly stats: Readonly<ConsumeStats>;
}

const defaultMaxMessages = limits.maxBatchSizeDefault;
const defaultRetryLeaseAfterMs = 1000;

/**
 * The loop's pauses on Node's timers. Not the cells' systemClock, whose timers are unref'd: a
 * consumer waiting out celld's absence would let its process exit under it.
 */
const nodeTimers: Clock = {
  now: () => Date.now(),
  schedule(atMs, fn) {
    const timer = setTimeout(fn, Math.max(0, atMs - Date.now()));
    return () => clearTimeout(timer);
  },
};
/** The longest a Retry-After holds the loop: a proxy's hour must not stop a worker for an hour. */
export const leaseRetryAfterMsMax = 60_000;

/**
 * How long to wait after a lease failed with `error`: the server's Retry-After, which knows why
 * (1 s for an overloaded or closing queue, 10 s for a full disk), else `fallbackMs`. A Retry-After
 * of 0 is taken as none: said every time, it would make a loop of calls.
 */
export function leaseRetryAfterMs(error: unknown, fallbackMs: number): number {
  const seconds = error instanceof QueuesApiError ? error.retryAfterSeconds : undefined;
  if (seconds === undefined || seconds <= 0) return fallbackMs;
  return Math.min(seconds * 1000, leaseRetryAfterMsMax);
}

/** What consume needs of a client (QueuesClient has it): lease, ack and nack. */
export interface LeasingClient {
  lease(queue: string, options?: LeaseOptions): Promise<LeasedMessage[]>;
  ack(queue: string, refs: readonly LeaseRef[]): Promise<SettleResult>;
  nack(queue: string, refs: readonly NackRef[], options?: { delay?: number }): Promise<SettleResult>;
}

/**
 * The worker loop: lease (long poll), run the handler for each message of the batch at once,
 * ack the ones that returned and nack the ones that threw. Stopping aborts a waiting lease (the
 * server hands back anything it leased for it), and waits for the batch in hand to be settled.
 * `clock` times the loop's pauses; a test gives a ManualClock and moves it.
 */
export function consume(client: LeasingClient, queue: string, handler: ConsumeHandler, options: ConsumeOptions = {}, clock: Clock = nodeTimers): Consumer {
  return new ConsumeLoop(client, queue, handler, options, clock).start();
}

/** Turns a callback's throw into the batch's failure, kept until the batch is settled. */
type Guard = (call: () => void) => void;

/** One consume() loop: its stages are leaseNext, handleBatch and settle. */
class ConsumeLoop {
  readonly stats: ConsumeStats = { leased: 0, acked: 0, nacked: 0, stale: 0 };
  private readonly stopper = new AbortController();
  private readonly onError: (error: unknown, message?: LeasedMessage) => void;
  private readonly wait: number;
  private readonly retryLeaseAfterMs: number;

  constructor(
    private readonly client: LeasingClient,
    private readonly queue: string,
    private readonly handler: ConsumeHandler,
    private readonly options: ConsumeOptions,
    private readonly clock: Clock,
  ) {
    this.onError = options.onError ?? (() => {});
    this.wait = options.wait ?? limits.leaseWaitSecondsMax;
    this.retryLeaseAfterMs = options.retryLeaseAfterMs ?? defaultRetryLeaseAfterMs;
  }

  start(): Consumer {
    const stopFromOutside = (): void => this.stopper.abort();
    this.options.signal?.addEventListener("abort", stopFromOutside, { once: true });
    if (this.options.signal?.aborted === true) this.stopper.abort();
    const done = this.run().finally(() => this.options.signal?.removeEventListener("abort", stopFromOutside));
    // The caller may only ever call stop(); an unobserved rejection must not crash the process.
    done.catch(() => undefined);
    const stopper = this.stopper;
    return {
      stats: this.stats,
      done,
      stop() {
        stopper.abort();
        return done;
      },
    };
  }

  private async run(): Promise<ConsumeStats> {
    while (!this.stopper.signal.aborted) {
      const batch = await this.leaseNext();
      if (batch === "stopped") break;
      if (batch === "failed") continue;
      this.stats.leased += batch.length;
      if (batch.length > 0) await this.handleBatch(batch);
      // Without a long poll the server answers an empty queue at once: leasing again at once
      // would call it hundreds of times a second for nothing.
      else if (this.wait === 0) await sleep(this.retryLeaseAfterMs, this.stopper.signal, this.clock);
    }
    return { ...this.stats };
  }

  /**
   * The next batch (a long poll). A lease that failed is reported and waited out ("failed"), or
   * thrown if retrying cannot help; "stopped" once stop() aborted it.
   */
  private async leaseNext(): Promise<LeasedMessage[] | "failed" | "stopped"> {
    try {
      return await this.client.lease(this.queue, {
        maxMessages: this.options.maxMessages ?? defaultMaxMessages,
        visibilityTimeout: this.options.visibilityTimeout,
        wait: this.wait,
        signal: this.stopper.signal,
      });
    } catch (error) {
      if (this.stopper.signal.aborted) return "stopped";
      if (cannotGetBetter(error)) throw error;
      const onError = this.onError;
      onError(error);
      await sleep(leaseRetryAfterMs(error, this.retryLeaseAfterMs), this.stopper.signal, this.clock);
      return "failed";
    }
  }

  /** Runs the handler for each message at once, settling each as it is done. */
  private async handleBatch(batch: LeasedMessage[]): Promise<void> {
    // A caller's callback that throws is a bug to surface, but only once the batch is settled:
    // thrown at once, it would leave every message of the batch, finished ones too, to wait out
    // its lease and be delivered again.
    let callbackFailure: { error: unknown } | undefined;
    const guard: Guard = (call) => {
      try {
        call();
      } catch (thrown) {
        callbackFailure ??= { error: thrown };
      }
    };
    const onError = this.onError;
    const handler = this.handler;
    const report = (error: unknown, message?: LeasedMessage): void => guard(() => onError(error, message));
    // Each message is settled once its own handler is done, together with those done in the same
    // turn of the event loop: held back until the slowest handler of the batch returned, a
    // finished message's ack could come after its lease ran out, and another worker would have
    // done it again.
    let acks: LeasedMessage[] = [];
    let nacks: NackRef[] = [];
    let flushing: NodeJS.Immediate | undefined;
    const settling: Array<Promise<void>> = [];
    const flush = (): void => {
      flushing = undefined;
      settling.push(this.settle(acks, nacks, batch, report, guard));
      acks = [];
      nacks = [];
    };
    await Promise.all(
      batch.map(async (message) => {
        try {
          await handler(message);
          acks.push(message);
        } catch (error) {
          report(error, message);
          nacks.push(this.nackOf(message, error, guard));
        }
        flushing ??= setImmediate(flush);
      }),
    );
    if (flushing !== undefined) {
      clearImmediate(flushing);
      flush();
    }
    await Promise.all(settling);
    if (callbackFailure !== undefined) throw callbackFailure.error;
  }

  /** The nack of a message whose handler threw, with its retry delay if one is set. */
  private nackOf(message: LeasedMessage, error: unknown, guard: Guard): NackRef {
    const retryDelay = this.options.retryDelay;
    let delay: number | undefined;
    if (typeof retryDelay !== "function") delay = retryDelay;
    else guard(() => (delay = retryDelay(message, error)));
    const ref: NackRef = { id: message.id, leaseGeneration: message.leaseGeneration };
    if (delay !== undefined) ref.delay = delay;
    return ref;
  }

  /** Settling is not cancelled by stop(): a finished message must not wait out its lease. */
  private async settle(acks: LeasedMessage[], nacks: NackRef[], batch: readonly LeasedMessage[], report: (error: unknown) => void, guard: Guard): Promise<void> {
    const [acked, nacked] = await Promise.allSettled([
      acks.length > 0 ? this.client.ack(this.queue, acks) : undefined,
      nacks.length > 0 ? this.client.nack(this.queue, nacks) : undefined,
    ]);
    for (const outcome of [acked, nacked]) {
      if (outcome?.status === "rejected") report(outcome.reason);
      else if (outcome?.value !== undefined) {
        this.stats.acked += outcome.value.acked;
        this.stats.nacked += outcome.value.retried + outcome.value.deadLettered;
        this.stats.stale += outcome.value.staleLeases.length;
        if (this.options.onStale === undefined) continue;
        for (const ref of outcome.value.staleLeases) {
          const message = batch.find((m) => m.id === ref.id && m.leaseGeneration === ref.leaseGeneration);
          if (message !== undefined) guard(() => this.options.onStale?.(message));
        }
      }
    }
  }
}

/**
 * A refused lease (bad key, no such queue, bad option) will not get better by retrying, nor will
 * one on a client, or a dispatcher, that has been closed: every later lease fails the same way.
 */
function cannotGetBetter(error: unknown): boolean {
  if (error instanceof QueuesApiError) return !error.retryable;
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  return code === "UND_ERR_CLOSED" || code === "UND_ERR_DESTROYED";
}

function sleep(ms: number, signal: AbortSignal, clock: Clock): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const cancel = clock.schedule(clock.now() + ms, done);
    function done(): void {
      cancel();
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
