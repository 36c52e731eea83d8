import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { ManualClock, systemClock } from "../src/index.ts";
import { adoptSystemClockOrigin, systemClockOrigin } from "../src/clock.ts";

test("timers fire in time order as the clock advances, and not before", () => {
  const clock = new ManualClock(1_000);
  const fired: string[] = [];
  clock.schedule(3_000, () => fired.push("b"));
  clock.schedule(2_000, () => fired.push("a"));
  const cancel = clock.schedule(2_500, () => fired.push("cancelled"));
  cancel();
  clock.advance(999);
  expect(fired).toEqual([]);
  clock.advance(2_000);
  expect(fired).toEqual(["a", "b"]);
  expect(clock.now()).toBe(3_999);
});

test("a timer scheduled for a time already passed fires at once, as a real clock's would", async () => {
  const clock = new ManualClock(5_000);
  let fired = false;
  clock.schedule(4_000, () => (fired = true));
  await new Promise((resolve) => setImmediate(resolve));
  expect(fired).toBe(true);
  expect(clock.pendingTimers()).toBe(0);
});

test("the clock never goes back", () => {
  const clock = new ManualClock(5_000);
  expect(() => clock.advance(-1)).toThrow(RangeError);
});

/**
 * The system clock under a wall clock that steps while celld runs (an NTP step, a clock set by
 * hand, a VM resumed), simulated with fake timers: Date steps, the monotonic clock (performance,
 * which Node's timers also follow) does not.
 */
describe("systemClock when the wall clock steps", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date", "hrtime", "setTimeout", "clearTimeout"], now: Date.UTC(2026, 5, 1) });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  test("a step back neither turns time back nor stretches a timer by the step", () => {
    const t0 = systemClock.now();
    let fired = false;
    systemClock.schedule(t0 + 30_000, () => (fired = true));
    vi.setSystemTime(Date.now() - 3_600_000);
    expect(systemClock.now()).toBeGreaterThanOrEqual(t0);
    vi.advanceTimersByTime(29_999);
    expect(fired).toBe(false);
    vi.advanceTimersByTime(1);
    expect(fired).toBe(true);
    expect(systemClock.now() - t0).toBe(30_000);
  });

  test("a step forward neither jumps time ahead nor fires a timer early", () => {
    const t0 = systemClock.now();
    let fired = false;
    systemClock.schedule(t0 + 30_000, () => (fired = true));
    vi.setSystemTime(Date.now() + 5 * 86_400_000);
    expect(systemClock.now() - t0).toBeLessThan(1_000);
    vi.advanceTimersByTime(1_000);
    expect(fired).toBe(false);
    vi.advanceTimersByTime(29_000);
    expect(fired).toBe(true);
  });

  test("a timer longer than setTimeout's 24.8-day limit fires at its time, not at once", () => {
    const t0 = systemClock.now();
    let fired = false;
    systemClock.schedule(t0 + 30 * 86_400_000, () => (fired = true));
    vi.advanceTimersByTime(2 ** 31);
    expect(fired).toBe(false);
    vi.advanceTimersByTime(30 * 86_400_000 - 2 ** 31 - 1);
    expect(fired).toBe(false);
    vi.advanceTimersByTime(1);
    expect(fired).toBe(true);
  });
});

test("a thread that adopts another's origin reads the same time, however late it started", () => {
  const origin = systemClockOrigin();
  try {
    // As a cell thread started later would have paired its own two reads, 8 ms apart.
    adoptSystemClockOrigin({ wallMs: origin.wallMs + 8, monotonicMs: origin.monotonicMs });
    const skewed = systemClock.now();
    adoptSystemClockOrigin(origin);
    const own = systemClock.now();
    expect(skewed - own).toBeGreaterThanOrEqual(7);
    expect(skewed - own).toBeLessThanOrEqual(8);
  } finally {
    adoptSystemClockOrigin(origin);
  }
});
