import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { drainJson, eventually, runHost as runHostClosedByTest, tidyAfterEach, type Project, type RunningHost } from "./host-harness.ts";

/**
 * Topologies a Worker team builds: dead-letter chains over several config files, consumers at the
 * concurrency bounds, handlers either side of the wall time, long delays across a restart. Each
 * test runs real workerd and real cells on the fake clock.
 */

interface Seen {
  queue: string;
  id: string;
  attempts: number;
  body: { tag?: string };
}

interface Metrics {
  backlogCount: number;
  backlogBytes: number;
  oldestMessageTimestamp?: string;
}

const consumerWorker = readFileSync(join(import.meta.dirname, "fixtures", "consumer-worker.js"), "utf8");
const { project, runHost } = tidyAfterEach();

/** A Worker of the consumer fixture: it reports every delivery to "seen" and obeys the body's mode. */
function workerFiles(dir: string, name: string, queues: string): Record<string, string> {
  return {
    [`${dir}/wrangler.toml`]: `
name = "${name}"
main = "worker.js"
compatibility_date = "2026-06-01"
kv_namespaces = [{ binding = "KV", id = "kv" }]
${queues}
`,
    [`${dir}/worker.js`]: consumerWorker,
  };
}

async function send(h: RunningHost, body: unknown, options?: unknown, binding = "JOBS"): Promise<Metrics> {
  const res = await h.fetch("/send", { method: "POST", body: JSON.stringify({ body, options, binding }) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { metadata: { metrics: Metrics } }).metadata.metrics;
}

/** Reads the deliveries reported so far into `into`, and returns those of `tag`. */
async function seenOf(h: RunningHost, into: Seen[], tag: string): Promise<Seen[]> {
  into.push(...((await drainJson(await h.cell("seen"))) as Seen[]));
  return into.filter((s) => s.body.tag === tag);
}

async function waitSeen(h: RunningHost, into: Seen[], tag: string, count: number): Promise<Seen[]> {
  return eventually(async () => {
    const got = await seenOf(h, into, tag);
    return got.length >= count ? got : undefined;
  }, `${count} deliveries of "${tag}"`);
}

async function held(h: RunningHost, queue: string): Promise<number> {
  const c = await (await h.cell(queue)).counts();
  return c.ready + c.delayed + c.leased + c.dead;
}

/** Real time, for checks that something does not happen: the fake clock does not move meanwhile. */
const quietFor = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("a dead-letter chain over two config files: a -> b (also produced to) -> c (no consumer); one copy at each step, none lost", async () => {
  const p: Project = project();
  const front = p.write(
    workerFiles(
      "front",
      "front",
      `
queues.producers = [{ binding = "JOBS", queue = "a" }, { binding = "B", queue = "b" }, { binding = "SEEN", queue = "seen" }]
# max_retries = 0: one delivery, then the dead-letter queue at once, whatever retry_delay says.
queues.consumers = [{ queue = "a", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0, retry_delay = 600, dead_letter_queue = "b" }]
`,
    ),
  );
  const back = p.write(
    workerFiles(
      "back",
      "back",
      `
queues.producers = [{ binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "b", max_batch_size = 1, max_batch_timeout = 0, max_retries = 1, retry_delay = 30, dead_letter_queue = "c" }]
`,
    ),
  );
  const h = await runHost([front, back], p.dataDir);
  const seen: Seen[] = [];

  await send(h, { tag: "poison", mode: "throw" });
  // A Worker that produces straight into the dead-letter queue: its messages are b's like any other.
  await send(h, { tag: "direct" }, undefined, "B");

  const [inA, inB] = await waitSeen(h, seen, "poison", 2);
  expect(inA).toMatchObject({ queue: "a", attempts: 1 });
  expect(inB).toMatchObject({ queue: "b", attempts: 1, id: inA!.id });
  expect(await waitSeen(h, seen, "direct", 1)).toMatchObject([{ queue: "b", attempts: 1 }]);

  // b's retry waits its retry_delay of 30 s, not a's 600.
  await eventually(async () => ((await (await h.cell("b")).counts()).delayed === 1 ? true : undefined), "b's retry");
  h.clock.advance(29_999);
  await quietFor(200);
  expect(await seenOf(h, seen, "poison")).toHaveLength(2);
  h.clock.advance(1);
  const third = (await waitSeen(h, seen, "poison", 3))[2];
  expect(third).toMatchObject({ queue: "b", attempts: 2, id: inA!.id });

  // c has no consumer: the message waits there, once, and nowhere else.
  const c = await h.cell("c");
  await eventually(async () => ((await c.counts()).ready === 1 ? true : undefined), "the message in c");
  const [inC] = await c.lease({ max: 10 });
  expect(inC!.id).toBe(inA!.id);
  expect(await held(h, "a")).toBe(0);
  expect(await held(h, "b")).toBe(0);
  expect(await held(h, "c")).toBe(1);
  await quietFor(200);
  expect(await seenOf(h, seen, "poison")).toHaveLength(3);
  expect(await seenOf(h, seen, "direct")).toHaveLength(1);
});

/** One Worker consuming "jobs" with `consumer`, producing to "jobs" (JOBS), "dead" and "seen". */
async function single(consumer: string, wallTimeSeconds = 30): Promise<RunningHost> {
  const p = project();
  const config = p.write(
    workerFiles(
      "app",
      "app",
      `
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "DEAD", queue = "dead" }, { binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "jobs", ${consumer} }]
`,
    ),
  );
  return runHost([config], p.dataDir, { wallTimeSeconds });
}

async function openGate(h: RunningHost, name: string): Promise<void> {
  expect((await h.fetch(`/open-gate?name=${name}`, { method: "POST" })).status).toBe(200);
}

test("a handler that ends 1 ms before the wall time is acked; one still running at the wall time is dead-lettered once", async () => {
  const h = await single(`max_batch_size = 1, max_batch_timeout = 0, max_retries = 0, dead_letter_queue = "dead"`, 10);
  const seen: Seen[] = [];
  await send(h, { tag: "under", mode: "gate", gate: "under" });
  await waitSeen(h, seen, "under", 1);
  h.clock.advance(9_999);
  await openGate(h, "under");
  await eventually(() => (h.batches.length === 1 ? true : undefined), "the first batch's report");
  expect(h.batches[0]).toMatchObject({ outcome: "ok", acked: 1, deadLettered: 0 });

  await send(h, { tag: "over", mode: "gate", gate: "over" });
  await waitSeen(h, seen, "over", 1);
  h.clock.advance(9_999);
  await quietFor(100);
  expect(h.batches).toHaveLength(1);
  h.clock.advance(1);
  await eventually(() => (h.batches.length === 2 ? true : undefined), "the second batch's report");
  expect(h.batches[1]).toMatchObject({ outcome: "wall-time", acked: 0, deadLettered: 1 });
  // The handler ends after all; its answer is not awaited any more and changes nothing.
  await openGate(h, "over");
  const dead = await h.cell("dead");
  await eventually(async () => ((await dead.counts()).ready === 1 ? true : undefined), "the message in the dead-letter queue");
  await quietFor(200);
  expect(await held(h, "jobs")).toBe(0);
  expect(await held(h, "dead")).toBe(1);
  expect(h.batches).toHaveLength(2);
});

test("max_concurrency = 1: slow handlers run one at a time, in a burst of max_batch_size = 1", async () => {
  const h = await single(`max_batch_size = 1, max_batch_timeout = 0, max_concurrency = 1`);
  const seen: Seen[] = [];
  for (const n of [1, 2, 3]) await send(h, { tag: "one", mode: "gate", gate: `g${n}` });
  const jobs = await h.cell("jobs");
  for (const n of [1, 2, 3]) {
    await waitSeen(h, seen, "one", n);
    await quietFor(150);
    expect(await seenOf(h, seen, "one")).toHaveLength(n);
    expect(await jobs.counts()).toMatchObject({ leased: 1, ready: 3 - n });
    await openGate(h, `g${n}`);
  }
  await eventually(async () => ((await held(h, "jobs")) === 0 ? true : undefined), "every message acked");
});

test("max_concurrency = 250: a burst of 260 slow single-message batches runs 250 at once, then the rest", async () => {
  const h = await single(`max_batch_size = 1, max_batch_timeout = 0, max_concurrency = 250`, 600);
  const body = { tag: "many", mode: "gate", gate: "many", pollMs: 200 };
  for (let i = 0; i < 3; i++) {
    const res = await h.fetch("/send-batch", {
      method: "POST",
      body: JSON.stringify({ messages: Array.from({ length: i < 2 ? 100 : 60 }, () => ({ body })) }),
    });
    expect(res.status).toBe(200);
  }
  const jobs = await h.cell("jobs");
  await eventually(async () => ((await jobs.counts()).leased === 250 ? true : undefined), "250 batches running", 60_000);
  await quietFor(300);
  expect(await jobs.counts()).toMatchObject({ leased: 250, ready: 10 });
  await openGate(h, "many");
  await eventually(async () => ((await held(h, "jobs")) === 0 ? true : undefined), "every message acked", 60_000);
  expect(h.batches.reduce((sum, b) => sum + b.acked, 0)).toBe(260);
}, 120_000);

test("retry_delay with max_retries = 100: 101 deliveries, each retry exactly retry_delay later, then the dead-letter queue", async () => {
  const h = await single(`max_batch_size = 1, max_batch_timeout = 0, max_retries = 100, retry_delay = 7, dead_letter_queue = "dead"`);
  const seen: Seen[] = [];
  await send(h, { tag: "hundred", mode: "throw" });
  const jobs = await h.cell("jobs");
  for (let n = 1; n <= 101; n++) {
    await waitSeen(h, seen, "hundred", n);
    if (n === 101) break;
    await eventually(async () => ((await jobs.counts()).delayed === 1 ? true : undefined), `retry ${n} waiting`);
    if (n === 1 || n === 100) {
      h.clock.advance(6_999);
      await quietFor(100);
      expect(await seenOf(h, seen, "hundred")).toHaveLength(n);
      h.clock.advance(1);
    } else {
      h.clock.advance(7_000);
    }
  }
  expect(seen.filter((s) => s.body.tag === "hundred").map((s) => s.attempts)).toEqual(Array.from({ length: 101 }, (_, i) => i + 1));
  const dead = await h.cell("dead");
  await eventually(async () => ((await dead.counts()).ready === 1 ? true : undefined), "the message in the dead-letter queue");
  expect(await held(h, "jobs")).toBe(0);
}, 60_000);

test("send()'s backlog counts a running batch and a delayed message, and no longer a dead-lettered one", async () => {
  const h = await single(`max_batch_size = 1, max_batch_timeout = 0, max_retries = 0, dead_letter_queue = "dead"`);
  const seen: Seen[] = [];
  const first = await send(h, { tag: "slow", mode: "gate", gate: "slow" });
  expect(first.backlogCount).toBe(1);
  await waitSeen(h, seen, "slow", 1);
  const second = await send(h, { tag: "later" }, { delaySeconds: 60 });
  expect(second.backlogCount).toBe(2);
  expect(second.oldestMessageTimestamp).toBe(first.oldestMessageTimestamp);

  await send(h, { tag: "poison", mode: "throw" });
  await waitSeen(h, seen, "poison", 1);
  const dead = await h.cell("dead");
  await eventually(async () => ((await dead.counts()).ready === 1 ? true : undefined), "the poison message dead-lettered");
  const afterDeath = await h.fetch("/send", { method: "POST", body: JSON.stringify({ body: { tag: "probe", mode: "gate", gate: "slow" } }) });
  const metrics = ((await afterDeath.json()) as { metadata: { metrics: Metrics } }).metadata.metrics;
  // slow (running), later (delayed), probe (just sent); not poison.
  expect(metrics.backlogCount).toBe(3);
  const inDead = await send(h, { tag: "into-dead" }, undefined, "DEAD");
  expect(inDead.backlogCount).toBe(2);
  await openGate(h, "slow");
});

test("a message delayed 86,400 s survives a restart and arrives at exactly its time", async () => {
  const p = project();
  const config = p.write(
    workerFiles(
      "app",
      "app",
      `
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0 }]
`,
    ),
  );
  // Closed here, not after the test: the second host takes over its data directory.
  const first = await runHostClosedByTest([config], p.dataDir);
  const sentAt = first.clock.now();
  try {
    await send(first, { tag: "tomorrow" }, { delaySeconds: 86_400 });
    first.clock.advance(86_399_000);
  } finally {
    await first.close();
  }
  const h = await runHost([config], p.dataDir, { clock: first.clock });
  const seen: Seen[] = [];
  h.clock.advance(999);
  await quietFor(300);
  expect(await seenOf(h, seen, "tomorrow")).toHaveLength(0);
  expect(await (await h.cell("jobs")).counts()).toMatchObject({ delayed: 1 });
  h.clock.advance(1);
  const [arrived] = await waitSeen(h, seen, "tomorrow", 1);
  expect(arrived).toMatchObject({ queue: "jobs", attempts: 1 });
  expect(h.clock.now() - sentAt).toBe(86_400_000);
});

test("a handler past its wall time is cancelled inside workerd: with max_concurrency = 1 the next delivery never overlaps it", async () => {
  const p = project();
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-06-01"
kv_namespaces = [{ binding = "KV", id = "kv" }]
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_concurrency = 1, max_retries = 1 }]
`,
    // Reports every 50 ms (real time) that it is still running, until the gate opens.
    "worker.js": `
export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/open") await env.KV.put("gate", "open");
    else await env.JOBS.send({});
    return new Response("ok");
  },
  async queue(batch, env) {
    const { attempts } = batch.messages[0];
    while ((await env.KV.get("gate")) === null) {
      await env.SEEN.send({ event: "running", attempts });
      await new Promise((r) => setTimeout(r, 50));
    }
    await env.SEEN.send({ event: "ended", attempts });
  },
};`,
  });
  const h = await runHost([config], p.dataDir, { wallTimeSeconds: 10 });
  const events: Array<{ event: string; attempts: number }> = [];
  const seen = await h.cell("seen");
  const reports = async (attempts: number, event = "running") => {
    events.push(...((await drainJson(seen)) as typeof events));
    return events.filter((e) => e.attempts === attempts && e.event === event).length;
  };
  await h.fetch("/send");
  await eventually(async () => ((await reports(1)) > 0 ? true : undefined), "the first delivery running");
  h.clock.advance(10_000);
  await eventually(async () => ((await reports(2)) > 0 ? true : undefined), "the second delivery running");
  expect(h.batches).toMatchObject([{ outcome: "wall-time", retried: 1 }]);
  const firstRan = await reports(1);
  await quietFor(500);
  // Ten more reports would have come in this time had the first call gone on.
  expect(await reports(1)).toBe(firstRan);
  await h.fetch("/open");
  await eventually(() => (h.batches.length === 2 ? true : undefined), "the second delivery's report");
  expect(h.batches[1]).toMatchObject({ outcome: "ok", acked: 1 });
  expect(await reports(2, "ended")).toBe(1);
  expect(await reports(1, "ended")).toBe(0);
});
