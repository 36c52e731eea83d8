import type { Clock } from "./clock.ts";

/**
 * A cell's time: its clock's, but never going back. Entry times then rise with seq (retention's
 * sweep relies on it), and a time the cell handed out (availableAt, leaseExpiresAt) is never in
 * its future after a restart on a clock that runs behind.
 */
export class CellTime {
  /** The latest time read. */
  private lastNowMs: number;
  /**
   * How far the cell's time runs ahead of its clock's, once the clock has stood behind a time the
   * cell already used (a restart with a slow clock, a clock set back by hand). Time then goes on
   * from there at the clock's pace: held until the clock caught up, no delay would end, no lease
   * expire and no long poll answer for as long as the clock was behind. Only ever grows.
   */
  private clockAheadMs = 0;
  /** The clock in the cell's time: what its timers and long-poll deadlines are given. */
  readonly clock: Clock;

  /** `notBeforeMs`: the time starts no earlier (the newest message's entry, a time reached before). */
  constructor(
    private readonly source: Clock,
    notBeforeMs: number,
  ) {
    this.lastNowMs = notBeforeMs;
    this.clock = {
      now: () => this.now(),
      schedule: (atMs, fn) => this.source.schedule(this.toClockMs(atMs), fn),
    };
  }

  /** The time now, ms: the clock's, plus however far it has been behind. */
  now(): number {
    const now = this.source.now() + this.clockAheadMs;
    if (now >= this.lastNowMs) {
      this.lastNowMs = now;
    } else {
      this.clockAheadMs += this.lastNowMs - now;
    }
    return this.lastNowMs;
  }

  /** A time of the cell's in the clock's time (what the registry, on the clock, compares). */
  toClockMs(cellMs: number): number {
    return cellMs - this.clockAheadMs;
  }
}
