import { existsSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { limits } from "@celld/queue-cell";
import { ApiKeyStore, defaultWorkerEnv } from "../packages/runtime/src/api/index.ts";
import { promtoolCheck, sample } from "../packages/runtime/test/metrics-harness.ts";
import { run, waitFor } from "./cli-harness.ts";
import { devScratchAfterEach } from "./dev-cli.ts";
import { eventually } from "./host-harness.ts";

const scratch = devScratchAfterEach();
const max = limits.cellThreadsMax;

function appProject() {
  const p = scratch.project();
  p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n`,
    "worker.js": "export default { fetch() { return new Response('ok'); } };",
  });
  return p;
}

test("celld dev refuses a --cell-threads past its bound before anything starts, exit 78", async () => {
  const p = appProject();
  const r = scratch.run(["dev", "--port", "0", "--cell-threads", String(max + 1)], p.dir);
  // EX_CONFIG, as the deployment's own refusals: a supervisor's restart would repeat it.
  expect(await r.exited).toBe(78);
  expect(r.output()).toBe(`celld: --cell-threads must be a whole number from 0 (cells on the main thread) to ${max}, got "${max + 1}"\n`);
  expect(existsSync(p.dataDir)).toBe(false);
});

test("celld serve refuses a CELLD_CELL_THREADS that is not a number before anything starts, exit 78", async () => {
  const p = appProject();
  const dataDir = join(p.dir, "served");
  const r = run(["serve", "--data", dataDir, "--port", "0", "--api-port", "0"], p.dir, { env: { CELLD_CELL_THREADS: "two" } });
  expect(await r.exited).toBe(78);
  expect(r.output()).toBe(`celld: CELLD_CELL_THREADS must be a whole number from 0 (cells on the main thread) to ${max}, got "two"\n`);
  expect(existsSync(dataDir)).toBe(false);
});

/** A Worker that sends to "jobs" on GET /send?n=, consumes "jobs", and passes each body on to "seen" (no consumer). */
const relayWorker = `export default {
  async fetch(req, env) {
    const n = Number(new URL(req.url).searchParams.get("n"));
    await env.JOBS.sendBatch(Array.from({ length: n }, (_, i) => ({ body: { i } })));
    return new Response("sent " + n);
  },
  async queue(batch, env) {
    await env.SEEN.sendBatch(batch.messages.map((m) => ({ body: m.body })));
  },
};
`;

const relayQueues = `
[[queues.producers]]
binding = "JOBS"
queue = "jobs"
[[queues.producers]]
binding = "SEEN"
queue = "seen"
[[queues.consumers]]
queue = "jobs"
max_batch_size = 10
max_batch_timeout = 0
`;

/**
 * The exposition once "jobs" has `count` acks: the consumer passes a batch on to "seen" before the
 * batch is acked, so the count may trail what "seen" shows by a moment.
 */
async function ackedCounted(url: string, count: number, headers: Record<string, string> = {}): Promise<string> {
  return eventually(async () => {
    const text = await (await fetch(url, { headers })).text();
    return sample(text, "celld_queue_messages_acked_total", { queue: "jobs" }) === count ? text : undefined;
  }, `${count} acks of "jobs" counted`);
}

/** Leases and acks what has reached "seen" over the native API, until `count` have; their `i`s. */
async function relayed(api: string, env: string, key: string, count: number): Promise<number[]> {
  const got: number[] = [];
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const deadline = Date.now() + 30_000;
  while (got.length < count) {
    if (Date.now() > deadline) throw new Error(`${got.length} of ${count} reached "seen"`);
    const lease = await fetch(`${api}/v1/${env}/queues/seen:lease`, { method: "POST", headers, body: JSON.stringify({ max_messages: 100, wait: 1 }) });
    expect(lease.status).toBe(200);
    const { messages } = (await lease.json()) as { messages: Array<{ id: string; lease_generation: number; event: { data: { i: number } } }> };
    if (messages.length === 0) continue;
    got.push(...messages.map((m) => m.event.data.i));
    const refs = messages.map((m) => ({ id: m.id, lease_generation: m.lease_generation }));
    const ack = await fetch(`${api}/v1/${env}/queues/seen:ack`, { method: "POST", headers, body: JSON.stringify({ messages: refs }) });
    expect(((await ack.json()) as { acked: number }).acked).toBe(messages.length);
  }
  return got.sort((a, b) => a - b);
}

test("celld dev --cell-threads 2 runs the Workers' queues on two threads, /metrics shows each thread's CPU, and --watch starts them again", { timeout: 180_000 }, async () => {
  const p = scratch.project();
  p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n${relayQueues}`,
    "worker.js": relayWorker,
  });
  const keys = ApiKeyStore.open(p.dataDir);
  const { key } = keys.create({ env: defaultWorkerEnv, scopes: ["events:write", "events:read"] });
  keys.close();
  const dev = scratch.run(["dev", "--port", "0", "--api-port", "0", "--metrics-public", "--cell-threads", "2", "--watch"], p.dir);
  const [, url] = await waitFor(dev, /Worker "app" listening on (http:\/\/\S+)/, 60_000);
  const [, api] = await waitFor(dev, /queues API listening on (http:\/\/\S+)\/v1/);
  await waitFor(dev, /--watch: a change/);
  expect(dev.output()).toContain("the queues' cells run on 2 worker threads (--cell-threads), each queue on one of them");
  expect(await (await fetch(`${url}send?n=25`)).text()).toBe("sent 25");
  expect(await relayed(api!, defaultWorkerEnv, key, 25)).toEqual(Array.from({ length: 25 }, (_, i) => i));
  const metrics = await ackedCounted(`${api}/metrics`, 25);
  for (const thread of ["main", "0", "1"]) expect(sample(metrics, "celld_cell_thread_cpu_seconds_total", { thread, mode: "user" }), thread).toBeGreaterThanOrEqual(0);
  expect(promtoolCheck(metrics)).toEqual({ status: 0, output: "" });

  // A change restarts the Workers on new threads (the old ones end with the old host).
  p.write({ "worker.js": relayWorker.replace("body: m.body", "body: { i: m.body.i + 100 }") });
  // --api-port 0 picks a free port again at the restart: the API's line says which.
  const apiAgain = await eventually(() => [...dev.output().matchAll(/queues API listening on (http:\/\/\S+)\/v1/g)][1]?.[1], "the restart", 60_000);
  expect(dev.output().match(/the queues' cells run on 2 worker threads/g)).toHaveLength(2);
  expect(await (await fetch(`${url}send?n=5`)).text()).toBe("sent 5");
  expect(await relayed(apiAgain, defaultWorkerEnv, key, 5)).toEqual([100, 101, 102, 103, 104]);
  // Counted from celld's start, across the restart.
  const after = await ackedCounted(`${apiAgain}/metrics`, 30);
  for (const thread of ["main", "0", "1"]) expect(sample(after, "celld_cell_thread_cpu_seconds_total", { thread, mode: "user" }), thread).toBeGreaterThanOrEqual(0);
  expect(promtoolCheck(after)).toEqual({ status: 0, output: "" });
  scratch.forget(dev);
  dev.kill("SIGTERM");
  expect(await dev.exited).toBe(0);
});
