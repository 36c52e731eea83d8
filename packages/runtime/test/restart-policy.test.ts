import { expect, test } from "vitest";
import { RestartPolicy } from "../src/workerd/restart-policy.ts";

test("each exit in the window waits twice as long; the fifth within a minute stops", () => {
  const policy = new RestartPolicy();
  const t0 = 1_000_000;
  expect(policy.exited(t0)).toEqual({ restart: true, delayMs: 250, exitsInWindow: 1 });
  expect(policy.exited(t0 + 1_000)).toEqual({ restart: true, delayMs: 500, exitsInWindow: 2 });
  expect(policy.exited(t0 + 2_000)).toEqual({ restart: true, delayMs: 1_000, exitsInWindow: 3 });
  expect(policy.exited(t0 + 3_000)).toEqual({ restart: true, delayMs: 2_000, exitsInWindow: 4 });
  expect(policy.exited(t0 + 59_999)).toEqual({ restart: false, exitsInWindow: 5, windowMs: 60_000 });
});

test("exits older than the window are forgotten: five spread over more than a minute each restart", () => {
  const policy = new RestartPolicy();
  const t0 = 1_000_000;
  for (let i = 0; i < 4; i++) policy.exited(t0 + i * 1_000);
  // The first exit is now a minute old: four remain in the window, the fifth is restarted.
  expect(policy.exited(t0 + 60_000)).toEqual({ restart: true, delayMs: 2_000, exitsInWindow: 4 });
  // Long after, the backoff starts again from the first step.
  expect(policy.exited(t0 + 200_000)).toEqual({ restart: true, delayMs: 250, exitsInWindow: 1 });
});

test("settings out of range are refused", () => {
  expect(() => new RestartPolicy({ exitsMax: 0, windowMs: 60_000, firstDelayMs: 250 })).toThrow(RangeError);
  expect(() => new RestartPolicy({ exitsMax: 5, windowMs: 0, firstDelayMs: 250 })).toThrow(RangeError);
});
