import { CellError } from "./errors.ts";
import type { SendTrace } from "./send-input.ts";

/** Told whether a group's writes became durable. */
export interface GroupFate {
  /** Told at once, before any call is answered (bookkeeping: tallies, retention notices). */
  committed: () => void;
  /** Answers the calls the group served beside its own (waiting leases), as one of its other calls. */
  answer?: () => void;
  failed: (error: unknown) => void;
}

/** One call waiting for the next group commit. `run` executes inside the transaction. */
interface Job {
  run: (nowMs: number) => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  trace: SendTrace | undefined;
  /** A producer's call: answered before the rest of its group (see SubmitOptions.producer). */
  producer: boolean;
}

export interface SubmitOptions {
  /** Told when the call's group starts and commits. */
  trace?: SendTrace;
  /**
   * A producer's send, which a Worker awaits. Once its group is durable it is answered first, and
   * the group's other calls (a consumer's acks and leases) and the leases it served follow on
   * setImmediate: their continuations (a delivery's framing and POST, a settle's report) would
   * otherwise run before the send's answer is written, and a Worker that awaits each send waits
   * for all of it (see docs/performance.md, "A producer that awaits each call"). The group's
   * bookkeeping (GroupFate.committed, afterCommit) is not deferred: it rides with the answer.
   * Its group's flush is urgent: it starts beside one already running (WalSync.durable).
   */
  producer?: boolean;
}

export interface WriteLoopHooks {
  /** Runs `fn` as one transaction (the store's). */
  transaction: <T>(fn: () => T) => T;
  /** When a transaction may start without the event loop waiting for a lock (CellStore.writesHeld). */
  writesHeld: () => Promise<void> | undefined;
  /**
   * When what has committed is on disk; undefined if it already is (CellStore.durable). `urgent`
   * for a group with a producer's call (SubmitOptions.producer).
   */
  durable: (urgent: boolean) => Promise<void> | undefined;
  /** The group's time; the same for every call in the group. */
  now: () => number;
  /** Work due at the start of every group (lease expiry, retention), inside the transaction. */
  beforeGroup: (nowMs: number) => void;
  /**
   * Work at the end of every group, inside the transaction, after every call (serving waiting
   * leases). What it returns is told the group's fate, like the calls.
   */
  endOfGroup: (nowMs: number) => GroupFate | undefined;
  /**
   * After the commit is durable and its calls answered; in a group with a producer's call, once
   * that is answered, before the rest (SubmitOptions.producer).
   */
  afterCommit: (nowMs: number) => void;
}

/**
 * The cell's single writer. Calls that arrive while a group is being written wait for the next
 * one; each group is one transaction, so durability costs one fsync per group, not per call.
 * A call's promise settles only after its group has committed and is durable (or failed as a
 * whole). The next group does not wait for that flush: groups that commit while one flush runs
 * share the next, so the event loop never waits for the disk.
 */
export class WriteLoop {
  private pending: Job[] = [];
  private scheduled = false;
  private closed = false;
  /** Calls whose group has committed and is not yet durable. */
  private awaitingDisk = 0;
  /** Settles after the newest group's flush (flushes finish in commit order). */
  private lastFlush: Promise<void> = Promise.resolve();
  /** The group the store held back (see WriteLoopHooks.writesHeld), written once it lets go. */
  private heldGroup: Promise<void> | undefined;

  constructor(private readonly hooks: WriteLoopHooks) {}

  submit<T>(run: (nowMs: number) => T, options: SubmitOptions = {}): Promise<T> {
    if (this.closed) return Promise.reject(new CellError("ERR_CELL_CLOSED", "the queue cell is closed"));
    const { trace, producer = false } = options;
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ run, resolve: resolve as (value: unknown) => void, reject, trace, producer });
      if (!this.scheduled) {
        this.scheduled = true;
        // setImmediate, not a microtask: I/O callbacks that arrived during the last commit run
        // first, so their calls join this group.
        setImmediate(() => this.flush());
      }
    });
  }

  /** Calls not yet answered: waiting for a group, or for their group's flush. */
  get queued(): number {
    return this.pending.length + this.awaitingDisk;
  }

  /** Writes everything queued now. Called by the timer and by close(). */
  flush(): void {
    const held = this.pending.length === 0 ? undefined : this.hooks.writesHeld();
    if (held !== undefined) {
      // Still scheduled: calls arriving meanwhile join the held group rather than set a timer.
      this.scheduled = true;
      this.heldGroup ??= held.then(() => {
        this.heldGroup = undefined;
        this.flush();
      });
      return;
    }
    this.scheduled = false;
    const jobs = this.pending;
    this.pending = [];
    if (jobs.length === 0) return;
    const nowMs = this.hooks.now();
    const results: unknown[] = new Array(jobs.length);
    let fate: GroupFate | undefined;
    for (let i = 0; i < jobs.length; i++) jobs[i]!.trace?.groupStarted();
    try {
      this.hooks.transaction(() => {
        this.hooks.beforeGroup(nowMs);
        for (let i = 0; i < jobs.length; i++) results[i] = jobs[i]!.run(nowMs);
        fate = this.hooks.endOfGroup(nowMs);
      });
    } catch (error) {
      // A CellError (a storage failure) is what callers may retry. Anything else is a bug: it is
      // passed on as it is, not dressed up as retryable.
      for (const job of jobs) job.reject(error);
      fate?.failed(error);
      return;
    }
    for (let i = 0; i < jobs.length; i++) jobs[i]!.trace?.committed();
    const answerRest = (): void => {
      for (let i = 0; i < jobs.length; i++) if (!jobs[i]!.producer) jobs[i]!.resolve(results[i]);
      fate?.answer?.();
    };
    // Settles once every call of the group is answered, so close() waits for the deferred ones too.
    const answer = (): Promise<void> | undefined => {
      let producers = 0;
      for (let i = 0; i < jobs.length; i++) {
        if (!jobs[i]!.producer) continue;
        producers += 1;
        jobs[i]!.resolve(results[i]);
      }
      fate?.committed();
      const deferred = producers > 0 && (producers < jobs.length || fate?.answer !== undefined);
      if (!deferred) answerRest();
      this.hooks.afterCommit(nowMs);
      if (!deferred) return undefined;
      return new Promise<void>((resolve) =>
        setImmediate(() => {
          answerRest();
          resolve();
        }),
      );
    };
    const durable = this.hooks.durable(jobs.some((job) => job.producer));
    if (durable === undefined) {
      const rest = answer();
      if (rest !== undefined) this.lastFlush = this.lastFlush.then(() => rest);
      return;
    }
    this.awaitingDisk += jobs.length;
    this.lastFlush = durable.then(
      () => {
        this.awaitingDisk -= jobs.length;
        return answer();
      },
      (error: unknown) => {
        // Committed, but whether it reached the disk is unknown: no caller is told it did.
        this.awaitingDisk -= jobs.length;
        for (const job of jobs) job.reject(error);
        fate?.failed(error);
        this.hooks.afterCommit(nowMs);
      },
    );
  }

  /** Writes what is queued, refuses further calls, and resolves once all of it is durable. */
  async close(): Promise<void> {
    this.flush();
    this.closed = true;
    while (this.heldGroup !== undefined) await this.heldGroup;
    await this.lastFlush;
  }
}
