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
 *
 * With `forwardingMax`, requests also wait here, in order, while that many are forwarded and
 * unanswered (`celld serve` sets the front's socket pool size). A request past the pool would
 * otherwise wait in Node's agent, already bound to the old version's socket: under a backlog a
 * swap's drain then waited for the whole backlog, past its bound, and the rest were cut (502s
 * under 200 requests/s on a loaded machine). Waiting here, it is routed when it runs.
 */

export interface RequestHoldBounds {
  /** Requests held at once; the next is refused. */
  heldMax: number;
  /** How long one request may be held before it is refused. */
  heldMsMax: number;
  /** Requests forwarded and unanswered at once; more wait, in order. Unset: no bound. */
  forwardingMax?: number;
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

  /** Runs the requests held, in the order they came (as many as forwardingMax lets), and lets new ones through. */
  release(): void {
    this.holding = false;
    this.pump();
  }

  private get hasRoom(): boolean {
    return this.inFlight < (this.bounds.forwardingMax ?? Infinity);
  }

  /** Runs waiting requests while not holding and there is room; each may forward (and take room). */
  private pump(): void {
    while (!this.holding && this.hasRoom) {
      const next = this.held.values().next();
      if (next.done === true) return;
      this.held.delete(next.value);
      next.value.cancelTimer();
      next.value.run();
    }
  }

  /** `run` now, or once released (and there is room); `refuse` instead when the hold is full or the wait too long. */
  admit(run: () => void, refuse: () => void): void {
    if (!this.holding && this.hasRoom && this.held.size === 0) return run();
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
      this.pump();
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
