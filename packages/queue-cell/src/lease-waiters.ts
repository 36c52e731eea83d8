import type { Clock } from "./clock.ts";
import type { LeasedMessage } from "./queue-cell.ts";

export interface WaiterSpec {
  max: number;
  visibilityMs: number;
  deadlineMs: number;
  signal: AbortSignal | undefined;
}

interface Waiter extends WaiterSpec {
  resolve: (messages: LeasedMessage[]) => void;
  reject: (error: unknown) => void;
  cancelDeadline: () => void;
  detachSignal: () => void;
  /** Messages leased for this waiter in a group that has not committed yet. */
  claimed: LeasedMessage[] | undefined;
}

/** What serve() decided inside a transaction; applied once the transaction's fate is known. */
export interface ServeOutcome {
  committed: () => void;
  failed: (error: unknown) => void;
}

/**
 * Long-poll leases waiting for a message. Served first come, first served, inside the write loop;
 * a waiter leaves with messages, or empty at its deadline or when its signal aborts.
 */
export class LeaseWaiters {
  private waiters: Waiter[] = [];

  constructor(private readonly clock: Clock) {}

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
      };
      const giveUp = (): void => {
        // Once messages are claimed for it, the waiter gets them; its caller must settle them.
        if (waiter.claimed !== undefined || !this.remove(waiter)) return;
        resolve([]);
      };
      waiter.cancelDeadline = this.clock.schedule(spec.deadlineMs, giveUp);
      if (spec.signal !== undefined) {
        const signal = spec.signal;
        signal.addEventListener("abort", giveUp, { once: true });
        waiter.detachSignal = () => signal.removeEventListener("abort", giveUp);
      }
      this.waiters.push(waiter);
    });
  }

  /** Inside a transaction: leases for each waiter in turn while messages last. */
  serve(leaseFor: (spec: WaiterSpec) => LeasedMessage[]): ServeOutcome {
    const claimed: Waiter[] = [];
    for (const waiter of this.waiters) {
      // Served by a group whose commit is not yet durable: it leaves with those messages, and
      // leasing more for it here would strand them, leased to nobody.
      if (waiter.claimed !== undefined) continue;
      const messages = leaseFor(waiter);
      if (messages.length === 0) break;
      waiter.claimed = messages;
      claimed.push(waiter);
      if (messages.length < waiter.max) break;
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
