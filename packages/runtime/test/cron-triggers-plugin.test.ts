import { expect, test } from "vitest";
import { ManualClock } from "@celld/queue-cell";
import { MemoryHostLog } from "../src/host/host-log.ts";
import type { PluginStartContext, ScheduledRunResult } from "../src/plugins/host-plugin.ts";
import { CronTriggersPlugin } from "../src/plugins/cron-triggers-plugin.ts";
import { parseOne } from "./config-failure.ts";

// The plugin's timing and its lines, with the run handed to a recorder in place of workerd (the
// runs themselves, in workerd, are tested end to end in test/cron-triggers.test.ts).

interface Run {
  worker: string;
  cron: string;
  at: string;
  finish: (result: ScheduledRunResult | Error) => void;
}

function setUp(crons: string[], startMs: number) {
  const clock = new ManualClock(startMs);
  const log = new MemoryHostLog();
  const plugin = new CronTriggersPlugin({ deployment: parseOne({ triggers: { crons } }), clock, log });
  const runs: Run[] = [];
  const context: PluginStartContext = {
    directUrl: () => Promise.reject(new Error("not used")),
    runScheduled: (worker, event) =>
      new Promise((resolve, reject) => {
        runs.push({
          worker,
          cron: event.cron,
          at: new Date(event.scheduledTime).toISOString(),
          finish: (result) => (result instanceof Error ? reject(result) : resolve(result)),
        });
      }),
  };
  return { clock, log, plugin, runs, context };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test("runs each due minute in order, says each cron's next time at start, and runs nothing after stop", async () => {
  const { clock, log, plugin, runs, context } = setUp(["*/10 * * * *", "30 9 * * *"], Date.UTC(2026, 5, 1, 9, 1, 0));
  await plugin.start(context);
  expect(log.lines).toEqual([
    'info: cron "*/10 * * * *" -> Worker "w" (next at 2026-06-01T09:10Z)',
    'info: cron "30 9 * * *" -> Worker "w" (next at 2026-06-01T09:30Z)',
  ]);
  clock.advanceTo(Date.UTC(2026, 5, 1, 9, 30, 0));
  expect(runs.map((r) => `${r.at} ${r.cron}`).sort()).toEqual([
    "2026-06-01T09:10:00.000Z */10 * * * *",
    "2026-06-01T09:20:00.000Z */10 * * * *",
    "2026-06-01T09:30:00.000Z */10 * * * *",
    "2026-06-01T09:30:00.000Z 30 9 * * *",
  ]);
  expect(runs.every((r) => r.worker === "w")).toBe(true);
  for (const run of runs) run.finish({ outcome: "ok" });
  await plugin.stop(0);
  clock.advanceTo(Date.UTC(2026, 5, 2, 12, 0, 0));
  expect(runs).toHaveLength(4);
  expect(clock.pendingTimers()).toBe(0);
});

test("a run still going does not hold back the next; stop waits for it up to the grace", async () => {
  const { clock, plugin, runs, context } = setUp(["* * * * *"], Date.UTC(2026, 5, 1, 9, 0, 30));
  await plugin.start(context);
  clock.advance(60_000);
  clock.advance(60_000);
  expect(runs.map((r) => r.at)).toEqual(["2026-06-01T09:01:00.000Z", "2026-06-01T09:02:00.000Z"]);
  let stopped = false;
  const stopping = plugin.stop(60_000).then(() => (stopped = true));
  await settle();
  runs[0]!.finish({ outcome: "ok" });
  await settle();
  expect(stopped).toBe(false);
  // The stop has already dropped every timer: the next minute's and the runs' 15-minute watches.
  expect(clock.pendingTimers()).toBe(0);
  runs[1]!.finish({ outcome: "ok" });
  await stopping;
  expect(stopped).toBe(true);
});

test("an outcome other than ok or a thrown error is warned of; a run workerd could not start is an error", async () => {
  const { clock, log, plugin, runs, context } = setUp(["0 * * * *"], Date.UTC(2026, 5, 1, 9, 59, 0));
  await plugin.start(context);
  clock.advance(60_000);
  runs[0]!.finish({ outcome: "exceededCpu" });
  await settle();
  clock.advance(3_600_000);
  runs[1]!.finish({ outcome: "exception" });
  await settle();
  clock.advance(3_600_000);
  runs[2]!.finish(new Error("connection refused"));
  await settle();
  expect(log.lines.slice(1)).toEqual([
    'warn: cron "0 * * * *" of Worker "w" at 2026-06-01T10:00Z: the scheduled() handler ended with outcome exceededCpu',
    'error: cron "0 * * * *" of Worker "w" at 2026-06-01T12:00Z: workerd could not run its scheduled() handler Error: connection refused',
  ]);
});

test("once workerd has exited, nothing more runs, and a run it cut off is not reported again", async () => {
  const { clock, log, plugin, runs, context } = setUp(["* * * * *"], Date.UTC(2026, 5, 1, 9, 0, 30));
  await plugin.start(context);
  clock.advance(60_000);
  plugin.runtimeExited();
  runs[0]!.finish(new Error("workerd exited"));
  clock.advance(600_000);
  await settle();
  expect(runs).toHaveLength(1);
  expect(log.lines.filter((l) => !l.startsWith("info:"))).toEqual([]);
});

test("a run past Cloudflare's 15 minutes is warned of once, and a stop no longer waits for it", async () => {
  const { clock, log, plugin, runs, context } = setUp(["0 * * * *"], Date.UTC(2026, 5, 1, 9, 59, 0));
  await plugin.start(context);
  clock.advance(60_000);
  clock.advance(15 * 60_000 - 1);
  expect(log.lines.filter((l) => l.startsWith("warn:"))).toEqual([]);
  clock.advance(1);
  expect(log.lines.filter((l) => l.startsWith("warn:"))).toEqual([
    'warn: cron "0 * * * *" of Worker "w" at 2026-06-01T10:00Z: the scheduled() handler has run for 15 minutes, ' +
      "Cloudflare's limit for a cron run; celld no longer waits for it (it runs on until it ends, or until celld stops)",
  ]);
  // The next hour's run ends in time: no word, and its watch is gone with it.
  clock.advanceTo(Date.UTC(2026, 5, 1, 11, 0, 0));
  runs[1]!.finish({ outcome: "ok" });
  await settle();
  clock.advanceTo(Date.UTC(2026, 5, 1, 11, 30, 0));
  expect(log.lines.filter((l) => l.startsWith("warn:"))).toHaveLength(1);
  // Neither the hung run nor anything else holds the stop: no grace is waited out.
  await Promise.race([plugin.stop(3_600_000), new Promise((_, reject) => setTimeout(() => reject(new Error("stop waited")), 1_000))]);
  runs[0]!.finish({ outcome: "ok" });
});
