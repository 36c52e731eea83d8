import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { ApiKeyStore } from "../packages/runtime/src/api/index.ts";
import { promtoolCheck, sample } from "../packages/runtime/test/metrics-harness.ts";
import { wranglerAgainst } from "../packages/runtime/test/wrangler-cli.ts";
import { eventually } from "./host-harness.ts";
import { servedEnv, serveScratchAfterEach } from "./serve-cli.ts";

/**
 * `celld serve --cell-threads 2`: a Worker deployed with the real wrangler sends to a queue and
 * consumes it, its cells on worker threads; the native API reads what the consumer passed on;
 * /metrics counts it; a restart of serve keeps it all.
 */

const scratch = serveScratchAfterEach();

const relay = {
  "wrangler.toml": `name = "relay"
main = "src/index.js"
compatibility_date = "2025-01-01"
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
`,
  "src/index.js": `export default {
  async fetch(req, env) {
    const n = Number(new URL(req.url).searchParams.get("n"));
    const from = Number(new URL(req.url).searchParams.get("from") ?? 0);
    await env.JOBS.sendBatch(Array.from({ length: n }, (_, i) => ({ body: { i: from + i } })));
    return new Response("sent " + n);
  },
  async queue(batch, env) {
    await env.SEEN.sendBatch(batch.messages.map((m) => ({ body: m.body })));
  },
};
`,
};

/** Leases and acks what has reached "seen" over the native API, until `count` have; their `i`s. */
async function relayed(api: string, key: string, count: number): Promise<number[]> {
  const got: number[] = [];
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const deadline = Date.now() + 30_000;
  while (got.length < count) {
    if (Date.now() > deadline) throw new Error(`${got.length} of ${count} reached "seen"`);
    const lease = await fetch(`${api}/v1/${servedEnv}/queues/seen:lease`, { method: "POST", headers, body: JSON.stringify({ max_messages: 100, wait: 1 }) });
    expect(lease.status).toBe(200);
    const { messages } = (await lease.json()) as { messages: Array<{ id: string; lease_generation: number; event: { data: { i: number } } }> };
    got.push(...messages.map((m) => m.event.data.i));
    if (messages.length === 0) continue;
    const refs = messages.map((m) => ({ id: m.id, lease_generation: m.lease_generation }));
    await fetch(`${api}/v1/${servedEnv}/queues/seen:ack`, { method: "POST", headers, body: JSON.stringify({ messages: refs }) });
  }
  return got.sort((a, b) => a - b);
}

it("celld serve --cell-threads 2 runs a deployed Worker's producer and consumer, and a restart keeps them", { timeout: 300_000 }, async () => {
  const dataDir = scratch.tempDir("celld-serve-");
  const keys = ApiKeyStore.open(dataDir);
  const { key } = keys.create({ env: servedEnv, scopes: ["workers:write", "workers:read", "events:write", "events:read", "metrics:read"] });
  keys.close();
  const first = await scratch.startServe(dataDir, { extraArgs: ["--cell-threads", "2"] });
  expect(first.serve.output()).toContain("the queues' cells run on 2 worker threads (--cell-threads), each queue on one of them");

  const dir = scratch.tempDir("celld-relay-");
  for (const [path, text] of Object.entries(relay)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const wrangler = wranglerAgainst(first.api, key, "acme", dir);
  for (const args of [["queues", "create", "jobs"], ["queues", "create", "seen"], ["deploy"]]) {
    const r = await wrangler(args);
    expect(r.code, r.stdout + r.stderr).toBe(0);
  }
  const asRelay = { headers: { host: "relay.localhost" } };
  expect(await (await fetch(`${first.workers}/?n=30`, asRelay)).text()).toBe("sent 30");
  expect(await relayed(first.api, key, 30)).toEqual(Array.from({ length: 30 }, (_, i) => i));
  // /metrics with a metrics:read key: the Workers' queues counted, each thread's CPU, promtool's check.
  // The consumer passes a batch on before it is acked: the count may trail "seen" by a moment.
  const metrics = await eventually(async () => {
    const text = await (await fetch(`${first.api}/metrics`, { headers: { authorization: `Bearer ${key}` } })).text();
    return sample(text, "celld_queue_messages_acked_total", { environment: servedEnv, queue: "jobs" }) === 30 ? text : undefined;
  }, "30 acks of jobs counted");
  expect(sample(metrics, "celld_queue_batches_total", { environment: servedEnv, queue: "jobs", outcome: "ok" })).toBeGreaterThanOrEqual(3);
  for (const thread of ["main", "0", "1"]) expect(sample(metrics, "celld_cell_thread_cpu_seconds_total", { thread, mode: "system" }), thread).toBeGreaterThanOrEqual(0);
  expect(promtoolCheck(metrics)).toEqual({ status: 0, output: "" });

  // Stopped and started again on the same directory and threads: the deployment, its queues and
  // a message sent before the stop (left in "seen") are all there.
  expect(await (await fetch(`${first.workers}/?n=1&from=30`, asRelay)).text()).toBe("sent 1");
  const pending = await waitDone(first.api, key, 1);
  expect(pending).toBe(1);
  scratch.forget(first.serve);
  first.serve.kill("SIGTERM");
  expect(await first.serve.exited).toBe(0);
  const second = await scratch.startServe(dataDir, { extraArgs: ["--cell-threads", "2"] });
  expect(await (await fetch(`${second.workers}/?n=2&from=31`, asRelay)).text()).toBe("sent 2");
  expect(await relayed(second.api, key, 3)).toEqual([30, 31, 32]);
});

/** Waits (real time) until "seen" holds `count` ready messages, without leasing them; returns its ready count. */
async function waitDone(api: string, key: string, count: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await fetch(`${api}/v1/${servedEnv}/queues/seen`, { headers: { authorization: `Bearer ${key}` } });
    const ready = ((await res.json()) as { counts?: { ready: number } }).counts?.ready ?? 0;
    if (ready >= count || Date.now() > deadline) return ready;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
