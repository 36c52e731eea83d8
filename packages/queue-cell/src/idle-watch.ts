import type { Clock } from "./clock.ts";

/**
 * Calls `onIdle` once nothing has been written for `idleMs`, once per quiet spell. One timer at a
 * time, re-armed when it fires early rather than at every write: a write then costs a read of the
 * clock, not a timer cancelled and set again (a busy queue commits thousands of times a second).
 */
export class IdleWatch {
  private lastWriteMs: number;
  private cancelTimer: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly idleMs: number,
    private readonly onIdle: () => void,
  ) {
    this.lastWriteMs = clock.now();
  }

  /** Something was written: the quiet spell starts again from now. */
  wrote(): void {
    this.lastWriteMs = this.clock.now();
    if (this.cancelTimer === undefined) this.arm(this.lastWriteMs + this.idleMs);
  }

  /** Whether nothing has been written for `idleMs`. */
  get idle(): boolean {
    return this.clock.now() - this.lastWriteMs >= this.idleMs;
  }

  /** Asks again in `idleMs`, without a write: the work the last call was for could not run then. */
  retryLater(): void {
    if (this.cancelTimer === undefined) this.arm(this.clock.now() + this.idleMs);
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  private arm(atMs: number): void {
    if (this.stopped) return;
    this.cancelTimer = this.clock.schedule(atMs, () => {
      this.cancelTimer = undefined;
      const dueAt = this.lastWriteMs + this.idleMs;
      if (this.clock.now() < dueAt) this.arm(dueAt);
      else this.onIdle();
    });
  }
}
