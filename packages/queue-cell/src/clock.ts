/**
 * Time as the cell sees it. The cell never reads Date.now or calls setTimeout itself: it is given
 * a Clock, so every time rule (delays, visibility, long-poll waits, retention) can be tested by
 * moving a ManualClock instead of sleeping.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls `fn` once, no earlier than `atMs`. Returns a function that cancels the call. */
  schedule(atMs: number, fn: () => void): () => void;
}

// setTimeout holds at most a signed 32-bit delay; longer waits are re-armed.
const timerDelayMsMax = 2 ** 31 - 1;

/**
 * The wall clock when the process started, moved on by the monotonic clock since. A step of the
 * wall clock while celld runs (an NTP step, a clock set by hand, a VM resumed and corrected) does
 * not move it: read from Date.now, a step back of an hour held every lease, delay and long poll an
 * hour longer (the cell never lets its time go back), and a step forward of four days expired
 * every lease and swept every message at once. Node's timers run on the same monotonic clock, so
 * a timer fires when this clock says it is due. NTP's gradual slewing moves both clocks alike.
 */
let origin: SystemClockOrigin = { wallMs: Date.now(), monotonicMs: monotonicMs() };
const monotonicWallNow = (): number => origin.wallMs + Math.floor(monotonicMs() - origin.monotonicMs);

/**
 * The process's monotonic clock, ms: libuv's, which every thread of the process reads alike
 * (performance.now() counts from each thread's own start).
 */
function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Where systemClock starts: the wall clock at a moment, and the monotonic clock at that moment. */
export interface SystemClockOrigin {
  wallMs: number;
  monotonicMs: number;
}

/** This thread's systemClock origin, for a worker thread to adopt (adoptSystemClockOrigin). */
export function systemClockOrigin(): SystemClockOrigin {
  return { ...origin };
}

/**
 * Makes this thread's systemClock the one of the thread that gave `from`: each thread reading
 * Date.now() and the monotonic clock at its own start pairs them apart by whatever ran between
 * the two reads (6-10 ms on a loaded machine), so a cell on a worker thread and the main thread
 * reading its times would disagree by that much. Called by a cell thread before anything reads
 * its clock.
 */
export function adoptSystemClockOrigin(from: SystemClockOrigin): void {
  origin = { ...from };
}

export const systemClock: Clock = {
  now: monotonicWallNow,
  schedule(atMs, fn) {
    let timer: NodeJS.Timeout | undefined;
    let cancelled = false;
    const arm = (): void => {
      const delay = Math.min(Math.max(0, atMs - monotonicWallNow()), timerDelayMsMax);
      timer = setTimeout(() => {
        if (cancelled) return;
        if (monotonicWallNow() < atMs) arm();
        else fn();
      }, delay);
      // A pending cell timer must not keep a finished process (a CLI, a test) alive.
      timer.unref();
    };
    arm();
    return () => {
      cancelled = true;
      if (timer !== undefined) clearTimeout(timer);
    };
  },
};

interface ManualTimer {
  atMs: number;
  order: number;
  fn: () => void;
}

/** A clock that moves only when told. Timers fire in time order during advance(). */
export class ManualClock implements Clock {
  private nowMs: number;
  private timers: ManualTimer[] = [];
  private nextOrder = 0;

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  schedule(atMs: number, fn: () => void): () => void {
    const timer: ManualTimer = { atMs, order: this.nextOrder++, fn };
    this.timers.push(timer);
    if (atMs <= this.nowMs) {
      // Already due: a real clock would fire it at once, so this one must not wait for the
      // next advance() (a test may never make one).
      setImmediate(() => {
        if (!this.timers.includes(timer)) return;
        this.timers = this.timers.filter((t) => t !== timer);
        timer.fn();
      });
    }
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way, in order. */
  advance(ms: number): void {
    if (ms < 0) throw new RangeError(`ManualClock cannot go back (advance ${ms})`);
    this.advanceTo(this.nowMs + ms);
  }

  advanceTo(targetMs: number): void {
    for (;;) {
      const due = this.timers
        .filter((t) => t.atMs <= targetMs)
        .sort((a, b) => a.atMs - b.atMs || a.order - b.order)[0];
      if (due === undefined) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.nowMs = Math.max(this.nowMs, due.atMs);
      due.fn();
    }
    this.nowMs = Math.max(this.nowMs, targetMs);
  }

  /** Timers not yet fired; a test can assert a cell left nothing behind. */
  pendingTimers(): number {
    return this.timers.length;
  }
}
