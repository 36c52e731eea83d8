import { expect, test } from "vitest";
import { ManualClock } from "@celld/queue-cell";
import { eventually, logOnceItShows, tidyAfterEach } from "./host-harness.ts";

// Cron Triggers fire the Worker's own scheduled() handler in workerd, on the host's clock (a
// manual one here): the minute that matched as controller.scheduledTime, the expression as written
// as controller.cron. The Worker keeps each run in KV and lists them at /runs.

const tidy = tidyAfterEach();

const worker = `export default {
  async fetch(request, env) {
    const list = await env.RUNS.list();
    return Response.json(list.keys.map((k) => k.name).sort());
  },
  async scheduled(controller, env) {
    if (controller.cron === "13 * * * *") throw new Error("the hourly report failed");
    await env.RUNS.put(new Date(controller.scheduledTime).toISOString() + " " + controller.cron, "");
  },
};
`;

const wrangler = `name = "cron"
main = "worker.js"
compatibility_date = "2026-04-01"
kv_namespaces = [{ binding = "RUNS", id = "runs" }]

[triggers]
crons = ["*/5 * * * *", "0 12 * * *", "13 * * * *"]
`;

async function runs(running: { fetch(path: string): Promise<Response> }): Promise<string[]> {
  return (await (await running.fetch("/runs")).json()) as string[];
}

test("each cron runs scheduled() at every minute it matches, with that minute and the expression", async () => {
  const p = tidy.project();
  const config = p.write({ "wrangler.toml": wrangler, "worker.js": worker });
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 11, 58, 30));
  const running = await tidy.runHost([config], p.dataDir, { clock });
  expect(running.log.lines).toContain('info: cron "*/5 * * * *" -> Worker "cron" (next at 2026-01-01T12:00Z)');
  expect(running.log.lines).toContain('info: cron "0 12 * * *" -> Worker "cron" (next at 2026-01-01T12:00Z)');
  expect(await runs(running)).toEqual([]);

  clock.advanceTo(Date.UTC(2026, 0, 1, 12, 0, 0));
  const noon = ["2026-01-01T12:00:00.000Z */5 * * * *", "2026-01-01T12:00:00.000Z 0 12 * * *"];
  await eventually(async () => ((await runs(running)).length === 2 ? true : undefined), "both noon runs");
  expect(await runs(running)).toEqual(noon);

  // 12:04:59 is not due; 12:05 is, for one of them only.
  clock.advanceTo(Date.UTC(2026, 0, 1, 12, 4, 59));
  clock.advanceTo(Date.UTC(2026, 0, 1, 12, 5, 0));
  await eventually(async () => ((await runs(running)).length === 3 ? true : undefined), "the 12:05 run");
  expect(await runs(running)).toEqual([...noon, "2026-01-01T12:05:00.000Z */5 * * * *"]);
});

test("a failed run is printed as the handler's error, and the cron stays armed for its next time", async () => {
  const p = tidy.project();
  const config = p.write({ "wrangler.toml": wrangler, "worker.js": worker });
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 1, 0));
  const running = await tidy.runHost([config], p.dataDir, { clock });
  // One step over 12:05, 12:10 and 12:13: each due time on the way runs, in order.
  clock.advanceTo(Date.UTC(2026, 0, 1, 12, 14, 0));
  const text = await logOnceItShows(running, /scheduled\(\) handler for "13 \* \* \* \*" threw/, "the failed run");
  expect(text).toContain("the hourly report failed");
  await eventually(async () => ((await runs(running)).length === 2 ? true : undefined), "the */5 runs");
  expect(await runs(running)).toEqual(["2026-01-01T12:05:00.000Z */5 * * * *", "2026-01-01T12:10:00.000Z */5 * * * *"]);

  clock.advanceTo(Date.UTC(2026, 0, 1, 13, 13, 0));
  await eventually(
    () => (running.log.lines.filter((l) => l.includes('handler for "13 * * * *" threw')).length === 2 ? true : undefined),
    "the second failed run",
  );
});

test.each([
  {
    what: "whose default export has no scheduled() handler",
    source: "export default { async fetch() { return new Response('no scheduled here'); } };",
    says: () => "its default export has no scheduled() handler",
  },
  {
    what: "with exports but no default export",
    source: "export class Thing {}\nexport async function scheduled() {}\n",
    says: () => "has no default export, so no scheduled() handler",
  },
  {
    what: "written as a service worker with no scheduled listener",
    source: 'addEventListener("fetch", (e) => e.respondWith(new Response("none")));\naddEventListener("queue", () => {});\n',
    says: (dir: string) => `its script ${dir}/nos/worker.js adds no "scheduled" event listener (addEventListener("scheduled", ...))`,
  },
])("a Worker with cron triggers $what is pointed out at start", async ({ source, says }) => {
  const p = tidy.project();
  const config = p.write({ "wrangler.toml": wrangler, "worker.js": worker });
  const other = p.write({
    "nos/wrangler.toml": `name = "nos"
main = "worker.js"
compatibility_date = "2026-04-01"
triggers = { crons = ["0 0 * * *"] }
`,
    "nos/worker.js": source,
  });
  const running = await tidy.runHost([config, other], p.dataDir);
  // The first is found inside workerd (its shim's "[celld] warning:"), the others by the host.
  const warning = `Worker "nos" has cron triggers ("0 0 * * *") but ${says(p.dir)}: every run of them will fail`;
  await eventually(() => (running.log.lines.some((l) => l.includes(warning)) ? true : undefined), "the warning");
  // The Worker that has one is not named.
  expect(running.log.lines.filter((l) => l.includes("every run of them will fail"))).toHaveLength(1);
});

test("with triggerHandlers (celld dev --test-scheduled), /cdn-cgi/handler/scheduled runs the first Worker's scheduled(); without, it reaches fetch()", async () => {
  const p = tidy.project();
  const config = p.write({ "wrangler.toml": wrangler, "worker.js": worker });
  const running = await tidy.runHost([config], p.dataDir, { triggerHandlers: true });
  const time = Date.UTC(2026, 2, 3, 4, 5);
  const ran = await running.fetch(`/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("*/5 * * * *")}&time=${time}`);
  expect([ran.status, await ran.text()]).toEqual([200, "ok"]);
  expect(await runs(running)).toEqual(["2026-03-03T04:05:00.000Z */5 * * * *"]);
  const failed = await running.fetch(`/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("13 * * * *")}`);
  expect([failed.status, await failed.text()]).toEqual([500, "exception"]);
  await logOnceItShows(running, /the hourly report failed/, "the failed run's error");
  await running.close();

  const plain = await tidy.runHost([config], p.dataDir);
  const reached = await plain.fetch(`/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("*/5 * * * *")}`);
  // The Worker's own fetch() answered: its list of runs, the one above still in KV.
  expect(await reached.json()).toEqual(["2026-03-03T04:05:00.000Z */5 * * * *"]);
});
