import type { Clock } from "./clock.ts";
import type { LeasedMessage } from "./store.ts";

export interface WaiterSpec {
  max: number;
  visibilityMs: number;
  deadlineMs: number;
  signal: AbortSignal | undefined;
  /** Served only once `max` messages are due, or at its deadline with whatever is due then. */
  fill: boolean;
  /** Recorded on the leased rows (LeaseOptions.owner). */
  owner: number;
}

interface Waiter extends WaiterSpec {
  resolve: (messages: LeasedMessage[]) => void;
  reject: (error: unknown) => void;
  cancelDeadline: () => void;
  detachSignal: () => void;
  /** Messages leased for this waiter in a group that has not committed yet. */
  claimed: LeasedMessage[] | undefined;
  /** A fill waiter whose deadline has come: the next serve leases what is due, even nothing. */
  expired: boolean;
}

/** What serve() decided inside a transaction; applied once the transaction's fate is known. */
export interface ServeOutcome {
  committed: () => void;
  failed: (error: unknown) => void;
}

/**
 * Long-poll leases waiting for a message. Served first come, first served, inside the write loop;
 * a waiter leaves with messages, or empty at its deadline or when its signal aborts.
 *
 * A fill waiter (a consumer collecting a batch) waits for `max` due messages rather than the
 * first, and is passed over until then: leased one send at a time, a batch of 100 cost 100
 * leases and their writes. At its deadline it is served with whatever is due.
 */
export class LeaseWaiters {
  private waiters: Waiter[] = [];
  /** Waiters a serve had leased for when it threw; groupFailed() answers them. */
  private servedByFailedServe: Waiter[] = [];

  /** `onFillDeadline`: a fill waiter's deadline came; a group must serve it (serve()). */
  constructor(
    private readonly clock: Clock,
    private readonly onFillDeadline: () => void = () => {},
  ) {}

  get size(): number {
    return this.waiters.length;
  }

  add(spec: WaiterSpec): Promise<LeasedMessage[]> {
    return new Promise<LeasedMessage[]>((resolve, reject) => {
      const waiter: Waiter = {
        ...spec,
        resolve,
        reject,
        cancelDeadline: () => {},
        detachSignal: () => {},
        claimed: undefined,
        expired: false,
      };
      const giveUp = (): void => {
        // Once messages are claimed for it, the waiter gets them; its caller must settle them.
        if (waiter.claimed !== undefined || !this.remove(waiter)) return;
        resolve([]);
      };
      const deadline = (): void => {
        if (!spec.fill) return giveUp();
        if (waiter.claimed !== undefined || !this.waiters.includes(waiter)) return;
        waiter.expired = true;
        this.onFillDeadline();
      };
      waiter.cancelDeadline = this.clock.schedule(spec.deadlineMs, deadline);
      if (spec.signal !== undefined) {
        const signal = spec.signal;
        signal.addEventListener("abort", giveUp, { once: true });
        waiter.detachSignal = () => signal.removeEventListener("abort", giveUp);
      }
      this.waiters.push(waiter);
    });
  }

  /**
   * Inside a transaction: leases for each waiter in turn while messages last. `canFill` says
   * whether `max` messages are due; a fill waiter it says no to (before its deadline) is passed
   * over, and the waiters behind it may take what is there.
   */
  serve(leaseFor: (spec: WaiterSpec) => LeasedMessage[], canFill: (max: number) => boolean): ServeOutcome {
    const claimed: Waiter[] = [];
    const claim = (waiter: Waiter, messages: LeasedMessage[]): void => {
      waiter.claimed = messages;
      claimed.push(waiter);
    };
    // Once a lease comes back short, nothing more is due: the waiters after it get nothing,
    // except that a fill waiter whose deadline has come leaves now, empty, rather than wait on.
    let exhausted = false;
    try {
      for (const waiter of this.waiters) {
        // Served by a group whose commit is not yet durable: it leaves with those messages, and
        // leasing more for it here would strand them, leased to nobody.
        if (waiter.claimed !== undefined) continue;
        if (exhausted) {
          if (waiter.expired) claim(waiter, []);
          continue;
        }
        if (waiter.fill && !waiter.expired && !canFill(waiter.max)) continue;
        const messages = leaseFor(waiter);
        if (messages.length > 0 || waiter.expired) claim(waiter, messages);
        if (messages.length < waiter.max) exhausted = true;
      }
    } catch (error) {
      // The transaction rolls back, and its group, with no outcome returned, cannot answer the
      // waiters served so far. Left claimed, nothing would ever answer them, not their deadline
      // nor close(); unclaimed, those still can, and groupFailed() answers them with the error
      // the group's callers are given.
      for (const waiter of claimed) waiter.claimed = undefined;
      this.servedByFailedServe.push(...claimed);
      throw error;
    }
    return {
      committed: () => {
        for (const waiter of claimed) {
          this.remove(waiter);
          waiter.resolve(waiter.claimed!);
        }
      },
      failed: (error) => {
        for (const waiter of claimed) {
          this.remove(waiter);
          waiter.reject(error);
        }
      },
    };
  }

  /**
   * A group failed. The waiters a serve of it had leased for, and fill waiters whose deadline has
   * come (they wait for a group to lease whatever is due), are told so, as a failed commit tells
   * the waiters it served, rather than left to wait for the next group, which on a quiet queue
   * may be a long time coming.
   */
  groupFailed(error: unknown): void {
    const served = this.servedByFailedServe;
    this.servedByFailedServe = [];
    for (const waiter of [...this.waiters]) {
      if (waiter.claimed !== undefined || !(waiter.expired || served.includes(waiter))) continue;
      this.remove(waiter);
      waiter.reject(error);
    }
  }

  /** Answers every waiter empty (the cell is closing), except those a pending group serves. */
  closeAll(): void {
    for (const waiter of [...this.waiters]) {
      if (waiter.claimed !== undefined) continue;
      this.remove(waiter);
      waiter.resolve([]);
    }
  }

  private remove(waiter: Waiter): boolean {
    const index = this.waiters.indexOf(waiter);
    if (index < 0) return false;
    this.waiters.splice(index, 1);
    waiter.cancelDeadline();
    waiter.detachSignal();
    return true;
  }
}
