import type { Clock } from "@celld/queue-cell";

/**
 * Requests that arrive while `celld serve` swaps its Workers wait here instead of failing. The
 * swap hands storage from the old workerd to the new (docs/design-notes.md, "The swap without a
 * gap"), so for a moment no Worker may run: the old one must have closed its files before the new
 * one opens them. Requests already forwarded finish on the old version (`drained()` says when);
 * those held go, once released, to wherever the router and upstreams point then: the new version.
 *
 * Holding is bounded, so a swap that hangs cannot pile up clients without end: past `heldMax`
 * requests, or after `heldMsMax` of waiting, a request is refused (the caller answers 503 with
 * Retry-After, as a restart always did).
 */

export interface RequestHoldBounds {
  /** Requests held at once; the next is refused. */
  heldMax: number;
  /** How long one request may be held before it is refused. */
  heldMsMax: number;
}

export const requestHoldDefaults: RequestHoldBounds = { heldMax: 10_000, heldMsMax: 30_000 };

interface Held {
  run: () => void;
  refuse: () => void;
  cancelTimer: () => void;
}

export class RequestHold {
  private holding = false;
  private readonly held = new Set<Held>();
  private inFlight = 0;
  private waiters: Array<() => void> = [];
  /** Requests held since the front started (for the swap's report and tests). */
  heldTotal = 0;
  /** Requests refused because the hold was full or too long. */
  refusedTotal = 0;

  constructor(
    private readonly clock: Clock,
    private readonly bounds: RequestHoldBounds = requestHoldDefaults,
  ) {}

  get isHolding(): boolean {
    return this.holding;
  }

  /** How many requests wait now. */
  get waiting(): number {
    return this.held.size;
  }

  /** From now on, new requests wait until release(). */
  hold(): void {
    this.holding = true;
  }

  /** Runs every request held, in the order they came, and lets new ones through. */
  release(): void {
    this.holding = false;
    const all = [...this.held];
    this.held.clear();
    for (const entry of all) {
      entry.cancelTimer();
      entry.run();
    }
  }

  /** `run` now, or once released; `refuse` instead when the hold is full or the wait too long. */
  admit(run: () => void, refuse: () => void): void {
    if (!this.holding) return run();
    if (this.held.size >= this.bounds.heldMax) {
      this.refusedTotal++;
      return refuse();
    }
    this.heldTotal++;
    const entry: Held = { run, refuse, cancelTimer: () => undefined };
    entry.cancelTimer = this.clock.schedule(this.clock.now() + this.bounds.heldMsMax, () => {
      if (!this.held.delete(entry)) return;
      this.refusedTotal++;
      refuse();
    });
    this.held.add(entry);
  }

  /** A request was forwarded to a Worker; call the function returned once it is answered (or cut). */
  forwarded(): () => void {
    this.inFlight++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.inFlight--;
      if (this.inFlight === 0) for (const wake of this.waiters.splice(0)) wake();
    };
  }

  /** Forwarded requests not yet answered. */
  get forwarding(): number {
    return this.inFlight;
  }

  /** Resolves once no forwarded request is unanswered (at once if none is). */
  drained(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}
