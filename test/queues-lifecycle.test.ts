import { readFileSync } from "node:fs";
import { join } from "node:path";
import { isConfigError } from "../packages/runtime/src/config/index.ts";
import { ManualClock } from "@celld/queue-cell";
import { afterEach, expect, test } from "vitest";
import { childProcessesOf, drainJson, eventually, project, runHost, type Project, type RunningHost } from "./host-harness.ts";

const worker = readFileSync(join(import.meta.dirname, "fixtures", "consumer-worker.js"), "utf8");
const projects: Project[] = [];
const hosts: RunningHost[] = [];

afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
  projects.splice(0).forEach((p) => p.remove());
});

function app(consumer: string): { p: Project; config: string } {
  const p = project();
  projects.push(p);
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
kv_namespaces = [{ binding = "KV", id = "kv" }]
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "SEEN", queue = "seen" }]
${consumer}
`,
    "worker.js": worker,
  });
  return { p, config };
}

async function start(
  config: string,
  dataDir: string,
  wallTimeSeconds = 60,
  clock?: ManualClock,
  batchBytesInFlightMax?: number,
): Promise<RunningHost> {
  const h = await runHost([config], dataDir, { wallTimeSeconds, clock, batchBytesInFlightMax });
  hosts.push(h);
  return h;
}

async function send(h: RunningHost, body: unknown, options?: unknown): Promise<void> {
  const res = await h.fetch("/send", { method: "POST", body: JSON.stringify({ body, options }) });
  expect(res.status).toBe(200);
}

test("a handler that never finishes holds its lease for the wall time, then counts one failed delivery", async () => {
  const { p, config } = app(`queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 1 }]`);
  const h = await start(config, p.dataDir, 120);
  await send(h, { tag: "hang", mode: "hang" });
  const seen = await h.cell("seen");
  await eventually(async () => ((await seen.counts()).ready === 1 ? true : undefined), "the first delivery");
  const jobs = await h.cell("jobs");
  expect(await jobs.counts()).toMatchObject({ leased: 1 });
  h.clock.advance(119_000);
  await new Promise((r) => setTimeout(r, 100));
  expect(await jobs.counts()).toMatchObject({ leased: 1 });
  h.clock.advance(1_000);
  await eventually(async () => ((await seen.counts()).ready === 2 ? true : undefined), "the second delivery");
  const deliveries = (await drainJson(seen)) as Array<{ attempts: number }>;
  expect(deliveries.map((d) => d.attempts)).toEqual([1, 2]);
  expect(h.log.lines.some((l) => l.includes("did not finish within 120 s"))).toBe(true);
  // The second delivery hangs too; after it, max_retries = 1 is spent and with no
  // dead_letter_queue the message is deleted.
  h.clock.advance(120_000);
  await eventually(async () => {
    const c = await jobs.counts();
    return c.ready + c.leased + c.delayed + c.dead === 0 ? true : undefined;
  }, "the message to be deleted");
});

test("large messages: batches stop starting while those running hold the host's budget of bytes", async () => {
  const { p, config } = app(`queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0 }]`);
  const h = await start(config, p.dataDir, 60, undefined, 3_000);
  // Each body is a little over 1,000 bytes of JSON: three batches reach the budget.
  for (let i = 0; i < 6; i++) await send(h, { tag: "big", mode: "gate", pad: "x".repeat(1_000) });
  const seen = await h.cell("seen");
  await eventually(async () => ((await seen.counts()).ready >= 3 ? true : undefined), "three batches to start");
  await new Promise((r) => setTimeout(r, 300));
  expect((await seen.counts()).ready).toBe(3);
  expect(await (await h.cell("jobs")).counts()).toMatchObject({ leased: 3, ready: 3 });
  await h.fetch("/open-gate", { method: "POST" });
  await eventually(async () => ((await seen.counts()).ready === 6 ? true : undefined), "the other three");
  await eventually(async () => ((await (await h.cell("jobs")).counts()).leased === 0 ? true : undefined), "every batch settled");
});

test("a message that keeps failing, with no dead_letter_queue, is deleted after max_retries", async () => {
  const { p, config } = app(`queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 2 }]`);
  const h = await start(config, p.dataDir);
  await send(h, { tag: "doomed", mode: "throw" });
  const jobs = await h.cell("jobs");
  const seen = await h.cell("seen");
  await eventually(async () => ((await seen.counts()).ready >= 3 ? true : undefined), "three deliveries");
  await eventually(async () => {
    const c = await jobs.counts();
    return c.ready + c.leased + c.delayed + c.dead === 0 ? true : undefined;
  }, "the message to be deleted");
  expect(((await drainJson(seen)) as Array<{ attempts: number }>).map((d) => d.attempts)).toEqual([1, 2, 3]);
});

test("delaySeconds and delivery_delay hold a message back; restart keeps pending, delayed and dead messages", async () => {
  const p = project();
  projects.push(p);
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
kv_namespaces = [{ binding = "KV", id = "kv" }]
queues.producers = [{ binding = "JOBS", queue = "jobs", delivery_delay = 60 }, { binding = "SEEN", queue = "seen" }]
`,
    "worker.js": worker,
  });
  let h = await start(config, p.dataDir);
  await send(h, { tag: "default-delay" });
  await send(h, { tag: "own-delay" }, { delaySeconds: 5 });
  await send(h, { tag: "no-delay" }, { delaySeconds: 0 });
  const jobs = await h.cell("jobs");
  expect(await jobs.counts()).toMatchObject({ ready: 1, delayed: 2 });
  h.clock.advance(5_000);
  expect(await jobs.counts()).toMatchObject({ ready: 2, delayed: 1 });
  // A dead message too, in the queue's own dead-letter set (no consumer configured).
  await jobs.configure({ maxDeliveries: 1 });
  const [m] = await jobs.lease({ max: 1 });
  await jobs.nack([{ id: m!.id, leaseGeneration: m!.leaseGeneration }]);
  const before = await jobs.counts();
  expect(before).toMatchObject({ ready: 1, delayed: 1, dead: 1 });

  await h.close();
  hosts.splice(hosts.indexOf(h), 1);
  h = await start(config, p.dataDir, 60, h.clock);
  const after = await (await h.cell("jobs")).counts();
  expect({ ready: after.ready, delayed: after.delayed, dead: after.dead }).toEqual({ ready: 1, delayed: 1, dead: 1 });
});

test("a deployment where two Workers consume one queue does not start", async () => {
  const p = project();
  projects.push(p);
  const a = p.write({
    "a/wrangler.toml": `name = "a"\nmain = "w.js"\ncompatibility_date = "2026-04-01"\nqueues.consumers = [{ queue = "jobs" }]\n`,
    "a/w.js": "export default { async queue() {} };",
  });
  const b = p.write({
    "b/wrangler.toml": `name = "b"\nmain = "w.js"\ncompatibility_date = "2026-04-01"\nqueues.consumers = [{ queue = "jobs" }]\n`,
    "b/w.js": "export default { async queue() {} };",
  });
  const error = await runHost([a, b], p.dataDir).catch((e: unknown) => e);
  expect(isConfigError(error)).toBe(true);
  expect(String((error as Error).message)).toMatch(/jobs/);
  expect(String((error as Error).message)).toContain("a/wrangler.toml");
  expect(String((error as Error).message)).toContain("b/wrangler.toml");
});

test("a compatibility date newer than workerd runs on the newest supported date, with a warning", async () => {
  const { p, config } = app("");
  const text = readFileSync(config, "utf8").replace("2026-04-01", "2099-01-01");
  p.write({ "wrangler.toml": text });
  const h = await start(config, p.dataDir);
  expect(h.log.lines.some((l) => l.includes('compatibility_date "2099-01-01" is newer than this workerd supports'))).toBe(true);
});

test("max_retries at its bound (100) deploys: the queue allows 101 deliveries", async () => {
  const { p, config } = app(`queues.consumers = [{ queue = "jobs", max_retries = 100 }]`);
  const h = await start(config, p.dataDir);
  expect((await h.cell("jobs")).queueConfig.maxDeliveries).toBe(101);
});

test("a handler's console output and its thrown error, with its stack, reach the host's log", async () => {
  const { p, config } = app(`queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]`);
  const h = await start(config, p.dataDir);
  await send(h, { mode: "log", text: "hello from queue()" });
  await send(h, { mode: "throw" });
  await eventually(
    () => (h.log.lines.some((l) => l.includes("handler failed on purpose")) ? true : undefined),
    "the thrown error in the log",
  );
  const lines = h.log.lines.join("\n");
  expect(lines).toContain("stdout: handler says: hello from queue()");
  expect(lines).toMatch(/stderr: \[celld\] queue\(\) handler for "jobs" threw: Error: handler failed on purpose/);
  expect(lines).toMatch(/at Object\.queue/);
});

test.runIf(process.platform === "linux")("workerd gone: waiting messages keep their retries, and the consumer backs off", async () => {
  const { p, config } = app(
    `queues.consumers = [{ queue = "jobs", max_batch_size = 10, max_batch_timeout = 0, max_retries = 1, dead_letter_queue = "dead" }]`,
  );
  const h = await start(config, p.dataDir);
  // Miniflare starts workerd as a child of this process.
  const pids = childProcessesOf(process.pid)
    .filter((c) => c.name.startsWith("workerd"))
    .map((c) => c.pid);
  expect(pids.length).toBeGreaterThan(0);
  for (const pid of pids) process.kill(pid, "SIGKILL");
  // Once the host has seen workerd's output close, workerd is gone and so are its sockets: a
  // batch sent before that could still be accepted, and then cut off (which counts).
  await eventually(
    () => (h.log.lines.some((l) => l.includes("workerd (the Workers runtime) exited unexpectedly")) ? true : undefined),
    "the host to notice workerd's exit",
  );
  const jobs = await h.cell("jobs");
  await jobs.send([1, 2, 3].map((n) => ({ body: new TextEncoder().encode(JSON.stringify({ n })), contentType: "json" })));
  await eventually(() => (h.log.lines.some((l) => l.includes("could not be run")) ? true : undefined), "a failed invocation");
  // Counted as deliveries, two failures would have used up max_retries = 1 within milliseconds.
  await new Promise((r) => setTimeout(r, 500));
  expect(await jobs.counts()).toMatchObject({ ready: 3, leased: 0, dead: 0 });
  expect((await (await h.cell("dead")).counts()).ready).toBe(0);
  const leased = await jobs.lease({ max: 10 });
  expect(leased.map((m) => m.deliveries)).toEqual([1, 1, 1]);
  expect(h.log.lines.filter((l) => l.includes("could not be run"))).toHaveLength(1);
  expect(h.log.lines.filter((l) => l.includes("workerd (the Workers runtime) exited unexpectedly"))).toHaveLength(1);
});

test.each([
  {
    what: "whose default export has no queue() handler",
    worker: "export default { async fetch() { return new Response('no queue here'); } };",
    says: "its default export has no queue() handler",
  },
  {
    what: "with exports but no default export",
    // A named queue export is not a handler: workerd reads only the default export's.
    worker: "export class Thing {}\nexport async function queue() {}\n",
    says: "has no default export, so no queue() handler",
  },
  {
    what: "written as a service worker with no queue listener",
    // workerd fails each batch ("No event listener registered for queue messages"), as for a
    // module with no queue() handler. The listener added through `self` is found as well.
    worker: 'addEventListener("fetch", (e) => e.respondWith(new Response("no queue here")));\nself.addEventListener("scheduled", () => {});\n',
    says: (dir: string) => `its script ${join(dir, "noq", "worker.js")} adds no "queue" event listener (addEventListener("queue", ...))`,
  },
])("a consumer Worker $what is pointed out at start", async ({ worker, says }) => {
  const { p, config } = app(`queues.consumers = [{ queue = "jobs" }]`);
  const other = p.write({
    "noq/wrangler.toml": `
name = "noq"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.consumers = [{ queue = "other" }]
`,
    "noq/worker.js": worker,
  });
  const h = await runHost([config, other], p.dataDir);
  hosts.push(h);
  // The first is found inside workerd (its shim's "[celld] warning:"), the others by the host.
  const warning =
    `Worker "noq" consumes "other" but ${typeof says === "string" ? says : says(p.dir)}: ` +
    "every batch will fail, and its messages be retried, then dead-lettered or deleted";
  await eventually(() => (h.log.lines.some((l) => l.includes(warning)) ? true : undefined), "the warning");
  // The Worker that has one is not named.
  expect(h.log.lines.filter((l) => l.includes("every batch will fail"))).toHaveLength(1);
});

test("a service-worker consumer that adds its queue listener gets no warning, and its batches are delivered", async () => {
  const { p, config } = app(`queues.consumers = [{ queue = "jobs" }]`);
  const other = p.write({
    "sw/wrangler.toml": `
name = "sw"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "other", max_batch_timeout = 0 }]
`,
    "sw/worker.js": 'addEventListener("queue", (event) => event.waitUntil(SEEN.send({ got: event.messages.map((m) => m.body) })));\n',
  });
  const h = await runHost([config, other], p.dataDir, { wallTimeSeconds: 60 });
  hosts.push(h);
  await (await h.cell("other")).send([{ body: new TextEncoder().encode(JSON.stringify(7)), contentType: "json" }]);
  const seen = await eventually(async () => {
    const got = await drainJson(await h.cell("seen"));
    return got.length > 0 ? got : undefined;
  }, "the batch");
  expect(seen).toEqual([{ got: [7] }]);
  expect(h.log.lines.filter((l) => l.includes("every batch will fail"))).toEqual([]);
});

test("a Worker's send refused by a full disk fails in the Worker and is logged by the host, once a minute per queue and cause", async () => {
  const { p, config } = app("");
  const h = await start(config, p.dataDir);
  // The cell's SQLite connection, private to its store: SQLite does not lower the cap below the
  // file's size, so a write needing a page more fails as on a full disk, with SQLITE_FULL.
  const db = ((await h.cell("jobs")) as unknown as { store: { db: { pragma(text: string): unknown } } }).store.db;
  db.pragma("max_page_count = 1");
  const sendBig = () => h.fetch("/send", { method: "POST", body: JSON.stringify({ body: "x".repeat(100_000), options: { contentType: "text" } }) });
  const refusals = () => h.log.lines.filter((line) => line.includes("a Worker's send was refused"));

  for (let i = 0; i < 3; i++) expect((await sendBig()).status).toBe(500);
  expect(h.log.lines.some((line) => line.includes("the queue's storage failed: database or disk is full (SQLITE_FULL)"))).toBe(true);
  const line = `error: a Worker's send was refused: queue "jobs": storage failed (SQLITE_FULL: database or disk is full); its writes are refused until the disk has free space`;
  expect(refusals()).toEqual([line]);

  const firstAt = new Date(h.clock.now()).toISOString();
  h.clock.advance(60_000);
  expect((await sendBig()).status).toBe(500);
  expect(refusals()).toEqual([line, `${line} (2 more like it since ${firstAt})`]);

  db.pragma("max_page_count = 1073741823");
  expect((await sendBig()).status).toBe(200);
  expect(refusals()).toHaveLength(2);
});
