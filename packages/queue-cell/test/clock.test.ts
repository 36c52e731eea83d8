import { expect, test } from "vitest";
import { ManualClock } from "../src/index.ts";

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
