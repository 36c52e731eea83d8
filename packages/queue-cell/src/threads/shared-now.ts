/**
 * The time, ms, as every thread of the process reads it alike: the monotonic clock from each
 * thread's own origin, whose wall-clock time (performance.timeOrigin) is taken to the microsecond.
 * systemClock's start is a whole Date.now() millisecond per thread, so two threads' systemClocks
 * differ by up to a millisecond or two; a cell's time crosses threads as an offset from this.
 */
export function sharedNow(): number {
  return performance.timeOrigin + performance.now();
}
