import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { ManualClock, ThreadedCellRegistry, type Cell } from "@celld/queue-cell";
import { ApiKeyStore, defaultWorkerEnv, startApiServer, type ApiServer } from "../packages/runtime/src/api/index.ts";
import { loadDeployment } from "../packages/runtime/src/config/index.ts";
import { cellThreadsPastCoresMessage } from "../packages/runtime/src/host/cell-registry-start.ts";
import { startHost, type Host } from "../packages/runtime/src/host/host.ts";
import { MemoryHostLog } from "../packages/runtime/src/host/host-log.ts";
import { CelldMetrics } from "../packages/runtime/src/metrics/celld-metrics.ts";
import { MetricsEndpoint } from "../packages/runtime/src/metrics/metrics-endpoint.ts";
import { promtoolCheck, sample } from "../packages/runtime/test/metrics-harness.ts";
import { drainJson, eventually, project, type Project } from "./host-harness.ts";

/**
 * A host whose cells run on two worker threads (HostOptions.cellThreads), as `celld dev
 * --cell-threads 2` puts it together: real workerd, real threads, the system clock (a fake one
 * cannot cross threads, so waits here are real and short). The queues are named so that the
 * consumed ones sit on different threads and the dead-letter queue on the other thread from its
 * source: a move between threads goes through the main thread.
 */

const consumerWorker = readFileSync(join(import.meta.dirname, "fixtures", "consumer-worker.js"), "utf8");

/** On two threads: "alpha" on 1, "beta-2" and alpha's dead-letter queue on 0 (checked below). */
const alpha = "alpha";
const beta = "beta-2";
const alphaDead = "alpha-dead";

const projects: Project[] = [];
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  projects.splice(0).forEach((p) => p.remove());
});

interface Seen {
  queue: string;
  id: string;
  attempts: number;
  body: { tag?: string; mode?: string };
}

interface Running {
  host: Host;
  api: ApiServer;
  registry: ThreadedCellRegistry;
  log: MemoryHostLog;
  /** The native API's root for an environment: `${api}/v1/${env}`. */
  v1(env: string): string;
  close(): Promise<void>;
}

/** startHost with cellThreads and the API with /metrics over its registry, as cli/dev.ts starts them. */
async function startThreaded(p: Project, metrics: CelldMetrics, keys: ApiKeyStore, cellThreads = 2): Promise<Running> {
  const log = new MemoryHostLog();
  const deployment = loadDeployment([join(p.dir, "wrangler.toml")]);
  const host = await startHost({ deployment, dataDir: p.dataDir, port: 0, log, durability: "full", cellThreads, consumerWallTimeSeconds: 30, metrics });
  let api: ApiServer;
  try {
    api = await startApiServer({
      registry: host.registry,
      keys,
      dataDir: p.dataDir,
      port: 0,
      workerQueues: { declared: () => deployment.queues },
      metrics: new MetricsEndpoint({ metrics, registry: host.registry, public: true, consumers: () => host.consumerLoads() }),
    });
  } catch (error) {
    await host.close();
    throw error;
  }
  expect(host.registry).toBeInstanceOf(ThreadedCellRegistry);
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => (closed ??= api.close().finally(() => host.close()));
  closers.push(close);
  return { host, api, registry: host.registry as ThreadedCellRegistry, log, v1: (env) => `${api.url}/v1/${env}`, close };
}

function appProject(): Project {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-06-01"
kv_namespaces = [{ binding = "KV", id = "kv" }]
queues.producers = [{ binding = "JOBS", queue = "${alpha}" }, { binding = "B", queue = "${beta}" }, { binding = "SEEN", queue = "seen" }]
# alpha: one delivery, then the dead-letter queue on the other thread.
queues.consumers = [
  { queue = "${alpha}", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0, dead_letter_queue = "${alphaDead}" },
  { queue = "${beta}", max_batch_size = 10, max_batch_timeout = 0 },
]
`,
    "worker.js": consumerWorker,
  });
  return p;
}

async function send(h: Host, binding: string, body: unknown): Promise<void> {
  const res = await fetch(new URL("/send", h.url), { method: "POST", body: JSON.stringify({ body, binding, options: { contentType: "json" } }) });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function call(url: string, key: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function seenUntil(cell: () => Promise<Cell>, into: Seen[], tag: string, count: number): Promise<Seen[]> {
  return eventually(async () => {
    into.push(...((await drainJson(await cell())) as Seen[]));
    const got = into.filter((s) => s.body.tag === tag);
    return got.length >= count ? got : undefined;
  }, `${count} deliveries of "${tag}"`);
}

test("Workers send and consume on two threads; a dead letter crosses to the other thread; the API, metrics and a restart work", async () => {
  const p = appProject();
  const metrics = new CelldMetrics({ workerEnv: defaultWorkerEnv });
  const keys = ApiKeyStore.open(p.dataDir);
  closers.push(async () => keys.close());
  const key = keys.create({ env: defaultWorkerEnv, scopes: ["events:publish", "events:write", "events:read"] }).key;
  const first = await startThreaded(p, metrics, keys);
  // The layout this test is about: a change of the owner hash would make it test less.
  expect([alpha, beta, alphaDead].map((q) => first.registry.threadOf(q))).toEqual([1, 0, 0]);
  expect(first.log.lines).toContain("info: the queues' cells run on 2 worker threads (--cell-threads), each queue on one of them");

  const seen: Seen[] = [];
  const seenCell = () => first.host.registry.open("seen");
  for (let i = 0; i < 5; i++) await send(first.host, "JOBS", { tag: "a", i });
  for (let i = 0; i < 7; i++) await send(first.host, "B", { tag: "b", i });
  await send(first.host, "JOBS", { tag: "bad", mode: "throw" });
  expect((await seenUntil(seenCell, seen, "a", 5)).map((s) => s.queue)).toEqual(Array(5).fill(alpha));
  expect((await seenUntil(seenCell, seen, "b", 7)).every((s) => s.queue === beta)).toBe(true);
  await seenUntil(seenCell, seen, "bad", 1);
  // The Workers' queues are cells of those names (so threadOf above is about them), open on their threads.
  expect(first.registry.openNames()).toEqual(expect.arrayContaining([alpha, beta, alphaDead, "seen"]));

  // The failed message went from alpha's thread to the dead-letter queue's, through main.
  const workersQueues = first.v1(defaultWorkerEnv);
  const deadQueue = await eventually(async () => {
    const got = await call(`${workersQueues}/queues/${alphaDead}`, key);
    return (got.json["counts"] as { ready: number } | undefined)?.ready === 1 ? got : undefined;
  }, "the dead letter in alpha-dead");
  expect(deadQueue.status).toBe(200);

  // The native API on a threaded cell: send, lease, ack; then dead letters and replay.
  const shop = first.v1(defaultWorkerEnv);
  expect((await call(`${shop}/queues`, key, { name: "work", max_deliveries: 1 })).status).toBe(201);
  const event = (id: string) => ({ specversion: "1.0", id, source: "/shop", type: "order.created", data: { id } });
  const sent = await call(`${shop}/queues/work:send`, key, { events: [event("o-1"), event("o-2")] });
  expect(sent.status).toBe(200);
  expect(sent.json["message_ids"]).toHaveLength(2);
  const leased = await call(`${shop}/queues/work:lease`, key, { max_messages: 10 });
  const messages = leased.json["messages"] as Array<{ id: string; lease_generation: number; event: { id: string } }>;
  expect(messages.map((m) => m.event.id)).toEqual(["o-1", "o-2"]);
  const [keep, fail] = messages as [(typeof messages)[0], (typeof messages)[0]];
  expect((await call(`${shop}/queues/work:ack`, key, { messages: [{ id: keep.id, lease_generation: keep.lease_generation }] })).json).toMatchObject({ acked: 1 });
  // max_deliveries 1: a nack is its last delivery, into the queue's own dead-letter set.
  expect((await call(`${shop}/queues/work:nack`, key, { messages: [{ id: fail.id, lease_generation: fail.lease_generation }] })).json).toMatchObject({
    dead_lettered: 1,
  });
  const dead = await call(`${shop}/queues/work/dead-letters`, key);
  expect((dead.json["dead_letters"] as Array<{ id: string }>).map((d) => d.id)).toEqual([fail.id]);
  expect((await call(`${shop}/queues/work:replay`, key, {})).json).toMatchObject({ replayed: 1 });
  const again = await call(`${shop}/queues/work:lease`, key, { max_messages: 10 });
  expect((again.json["messages"] as Array<{ id: string }>).map((m) => m.id)).toEqual([fail.id]);
  // Left leased across the restart: it comes back when its lease runs out, not before.

  // The metrics count what the threads did, and promtool takes the exposition.
  // A handler reports to "seen" before its batch is acked: the acks are counted a moment later.
  const text = await eventually(async () => {
    const body = await metrics.registry.metrics();
    const acked = [alpha, beta].map((queue) => sample(body, "celld_queue_messages_acked_total", { queue }));
    const deadLettered = sample(body, "celld_queue_messages_dead_lettered_total", { queue: alpha });
    return acked[0] === 5 && acked[1] === 7 && deadLettered === 1 ? body : undefined;
  }, "the acks counted");
  expect(sample(text, "celld_queue_messages_sent_total", { queue: alpha })).toBe(6);
  expect(sample(text, "celld_queue_messages_sent_total", { queue: beta })).toBe(7);
  expect(sample(text, "celld_queue_messages_acked_total", { queue: beta })).toBe(7);
  expect(sample(text, "celld_queue_messages_dead_lettered_total", { queue: alpha })).toBe(1);
  expect(sample(text, "celld_queue_send_commit_seconds_count", { queue: alpha })).toBe(6);
  expect(sample(text, "celld_fsync_seconds_count")).toBeGreaterThan(0);
  const scraped = await fetch(`${first.api.url}/metrics`);
  expect(scraped.status).toBe(200);
  const exposition = await scraped.text();
  for (const thread of ["main", "0", "1"]) {
    for (const mode of ["user", "system"]) expect(sample(exposition, "celld_cell_thread_cpu_seconds_total", { thread, mode }), `${thread} ${mode}`).toBeGreaterThanOrEqual(0);
  }
  const check = promtoolCheck(exposition);
  expect(check.output).toBe("");
  expect(check.status).toBe(0);

  // A restart on the same directory, threads again: nothing is lost, and the Workers run on.
  await first.close();
  const second = await startThreaded(p, metrics, keys);
  const afterRestart = second.v1(defaultWorkerEnv);
  const deadAfter = await call(`${afterRestart}/queues/${alphaDead}`, key);
  expect(deadAfter.json["counts"]).toMatchObject({ ready: 1 });
  const workAfter = await call(`${afterRestart}/queues/work`, key);
  expect(workAfter.json["counts"]).toMatchObject({ ready: 0, leased: 1, dead: 0 });
  const seenAgain: Seen[] = [];
  await send(second.host, "B", { tag: "after", i: 0 });
  await send(second.host, "JOBS", { tag: "after", i: 1 });
  expect((await seenUntil(() => second.host.registry.open("seen"), seenAgain, "after", 2)).map((s) => s.queue).sort()).toEqual([alpha, beta].sort());
});

test("cellThreads with a test's clock is refused before anything starts, naming the option", async () => {
  const p = appProject();
  const deployment = loadDeployment([join(p.dir, "wrangler.toml")]);
  await expect(startHost({ deployment, dataDir: p.dataDir, port: 0, log: new MemoryHostLog(), cellThreads: 2, clock: new ManualClock() })).rejects.toThrow(
    new TypeError(
      "HostOptions.cellThreads (2) needs the system clock, but a clock was given: a clock object cannot cross to the cells' threads; " +
        "leave cellThreads at 0 to run the cells on a test's clock",
    ),
  );
  // Nothing was claimed or created: the data directory is not there.
  expect(existsSync(p.dataDir)).toBe(false);
});

test("more cell threads than cores is said at start, with what to pass instead", async () => {
  const p = appProject();
  const metrics = new CelldMetrics({ workerEnv: defaultWorkerEnv });
  const keys = ApiKeyStore.open(p.dataDir);
  closers.push(async () => keys.close());
  const running = await startThreaded(p, metrics, keys, availableParallelism() + 1);
  const threads = availableParallelism() + 1;
  expect(running.log.lines).toContain(`warn: ${cellThreadsPastCoresMessage(threads, availableParallelism())}`);
  expect(cellThreadsPastCoresMessage(3, 2)).toBe(
    "--cell-threads 3 is more than this machine's 2 cores: the threads take turns, and each costs about 10 MB; " +
      "1 or fewer leaves a core for workerd and HTTP (docs/operating.md#cell-threads---cell-threads)",
  );
});

test("a cell thread that dies: its queues open on a new thread, and the Workers' producer and consumer go on", async () => {
  const p = appProject();
  const metrics = new CelldMetrics({ workerEnv: defaultWorkerEnv });
  const keys = ApiKeyStore.open(p.dataDir);
  closers.push(async () => keys.close());
  const running = await startThreaded(p, metrics, keys);
  const seen: Seen[] = [];
  const seenCell = () => running.host.registry.open("seen");
  await send(running.host, "JOBS", { tag: "before" });
  await seenUntil(seenCell, seen, "before", 1);

  // As an out-of-memory end would: alpha's thread is gone, with the consumer's long poll on it.
  await running.registry.terminateThread(running.registry.threadOf(alpha));
  expect(running.log.lines.join("\n")).toMatch(/cell thread 1 exited/);
  // The producer's next send opens alpha on a new thread; the consumer takes its cell again.
  for (let i = 0; i < 3; i++) await send(running.host, "JOBS", { tag: "after", i });
  const after = await seenUntil(seenCell, seen, "after", 3);
  expect(after.map((s) => s.queue)).toEqual([alpha, alpha, alpha]);
  expect(running.log.lines).toContain(`info: queue "${alpha}": its cell closed under the consumer (a cell thread ended?); opened again`);
  // Acked on the new thread: nothing left behind in alpha.
  await eventually(async () => {
    const counts = await (await running.host.registry.open(alpha)).counts();
    return counts.ready + counts.leased === 0 ? true : undefined;
  }, "alpha empty");
});

test("delivery paused and resumed over the API reaches a consumer whose cell is on a thread; purge works there too", async () => {
  const p = appProject();
  const metrics = new CelldMetrics({ workerEnv: defaultWorkerEnv });
  const keys = ApiKeyStore.open(p.dataDir);
  closers.push(async () => keys.close());
  const key = keys.create({ env: defaultWorkerEnv, scopes: ["events:publish", "events:write", "events:read"] }).key;
  const running = await startThreaded(p, metrics, keys);
  const queues = `${running.v1(defaultWorkerEnv)}/queues`;
  const patch = (queue: string, body: unknown) =>
    fetch(`${queues}/${queue}`, { method: "PATCH", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  const seen: Seen[] = [];
  const seenCell = () => running.host.registry.open("seen");

  expect((await patch(beta, { delivery_paused: true })).status).toBe(200);
  for (let i = 0; i < 3; i++) await send(running.host, "B", { tag: "paused", i });
  // Real time: the consumer, on the main thread, heard the pause its thread told, and leases nothing.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect((await drainJson(await seenCell())).length).toBe(0);
  expect((await call(`${queues}/${beta}`, key)).json["counts"]).toMatchObject({ ready: 3, leased: 0 });
  // The API's own lease is refused while paused, as on a local cell.
  expect((await call(`${queues}/${beta}:lease`, key, { max_messages: 1 })).status).toBe(409);

  expect((await patch(beta, { delivery_paused: false })).status).toBe(200);
  expect((await seenUntil(seenCell, seen, "paused", 3)).map((s) => s.queue)).toEqual([beta, beta, beta]);

  // Purge: a cut taken and applied on the queue's thread.
  expect((await patch(beta, { delivery_paused: true })).status).toBe(200);
  for (let i = 0; i < 4; i++) await send(running.host, "B", { tag: "purged", i });
  expect((await call(`${queues}/${beta}:purge`, key, { scope: "all" })).json).toMatchObject({ purged: 4 });
  expect((await call(`${queues}/${beta}`, key)).json["counts"]).toMatchObject({ ready: 0, leased: 0, dead: 0 });
});
