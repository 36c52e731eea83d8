import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { drainJson, eventually, project, runHost, type RunningHost } from "./host-harness.ts";

interface Seen {
  queue: string;
  id: string;
  attempts: number;
  timestamp: number;
  size: number;
  body: { tag?: string; mode?: string; n?: number } & Record<string, unknown>;
}

const fixture = (name: string): string => readFileSync(join(import.meta.dirname, "fixtures", name), "utf8");

describe("a consumer Worker in workerd", () => {
  const p = project();
  let h: RunningHost;
  let seen: Seen[] = [];

  beforeAll(async () => {
    const main = p.write({
      "app/wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-06-01"
kv_namespaces = [{ binding = "KV", id = "kv" }]

[[queues.producers]]
binding = "JOBS"
queue = "jobs"

[[queues.producers]]
binding = "SEEN"
queue = "seen"

[[queues.consumers]]
queue = "jobs"
max_batch_size = 3
max_batch_timeout = 5
max_retries = 2
retry_delay = 0
max_concurrency = 2
dead_letter_queue = "jobs-dlq"
`,
      "app/worker.js": fixture("consumer-worker.js"),
      "dlq/wrangler.jsonc": `{
  // The dead-letter queue's own consumer.
  "name": "dlq",
  "main": "worker.js",
  "compatibility_date": "2026-06-01",
  "queues": {
    "producers": [{ "binding": "SEEN", "queue": "seen" }],
    "consumers": [{ "queue": "jobs-dlq", "max_batch_size": 10, "max_batch_timeout": 0 }],
  },
}`,
      "dlq/worker.js": fixture("dlq-worker.js"),
    });
    h = await runHost([main, join(p.dir, "dlq/wrangler.jsonc")], p.dataDir, { wallTimeSeconds: 60 });
  });

  afterAll(async () => {
    await h?.close();
    p.remove();
  });

  async function seenFor(tag: string): Promise<Seen[]> {
    seen = seen.concat((await drainJson(await h.cell("seen"))) as Seen[]);
    return seen.filter((s) => s.body?.tag === tag);
  }

  async function waitSeen(tag: string, count: number): Promise<Seen[]> {
    return eventually(async () => {
      const got = await seenFor(tag);
      return got.length >= count ? got : undefined;
    }, `${count} deliveries of "${tag}"`);
  }

  async function sendBatch(messages: unknown[], options?: unknown): Promise<void> {
    const res = await h.fetch("/send-batch", { method: "POST", body: JSON.stringify({ messages, options }) });
    expect(res.status).toBe(200);
  }

  /** Moves the clock on until every retry has run its course and both queues are empty. */
  async function runDry(): Promise<void> {
    const jobs = await h.cell("jobs");
    const dlq = await h.cell("jobs-dlq");
    await eventually(async () => {
      const [a, b] = [await jobs.counts(), await dlq.counts()];
      if (a.ready + a.leased + a.delayed + b.ready + b.leased + b.delayed === 0) return true;
      h.clock.advance(5_000);
      return undefined;
    }, "both queues to run dry");
  }

  async function idle(queue = "jobs"): Promise<void> {
    await eventually(async () => {
      const c = await (await h.cell(queue)).counts();
      return c.ready + c.leased + c.delayed === 0 ? true : undefined;
    }, `queue ${queue} to be empty`);
  }

  test("batches fill to max_batch_size; a short batch waits for max_batch_timeout", async () => {
    await sendBatch(Array.from({ length: 7 }, (_, n) => ({ body: { tag: "size", n } })));
    const firstTwo = await waitSeen("size", 6);
    expect(firstTwo.map((s) => s.size)).toEqual([3, 3, 3, 3, 3, 3]);
    // The seventh waits for its window, which only the (manual) clock can close.
    await new Promise((r) => setTimeout(r, 200));
    expect(await seenFor("size")).toHaveLength(6);
    h.clock.advance(5_000);
    const all = await waitSeen("size", 7);
    expect(all[6]!.size).toBe(1);
    expect(all.map((s) => s.body.n).sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    await idle();
  });

  test("a handler that returns acks its batch; id, timestamp and attempts are as sent", async () => {
    const before = Date.now();
    const res = await h.fetch("/send", { method: "POST", body: JSON.stringify({ body: { tag: "ok" } }) });
    const metrics = (await res.json()) as { metadata: { metrics: { backlogCount: number } } };
    expect(metrics.metadata.metrics.backlogCount).toBeGreaterThanOrEqual(1);
    h.clock.advance(5_000);
    const [s] = await waitSeen("ok", 1);
    expect(s).toMatchObject({ queue: "jobs", attempts: 1 });
    expect(s!.id).toMatch(/^[0-9A-Z]{26}$/);
    expect(s!.timestamp).toBeGreaterThanOrEqual(before - 60_000);
    await idle();
  });

  test("a handler that throws retries the batch; after max_retries it goes to the dead-letter queue", async () => {
    await sendBatch([{ body: { tag: "poison", mode: "throw" } }]);
    await runDry();
    const deliveries = await waitSeen("poison", 4);
    const fromJobs = deliveries.filter((s) => s.queue === "jobs");
    const fromDlq = deliveries.filter((s) => s.queue === "jobs-dlq");
    expect(fromJobs.map((s) => s.attempts)).toEqual([1, 2, 3]);
    expect(fromDlq).toHaveLength(1);
    // Same message: id and timestamp survive the move; the dead-letter queue counts afresh.
    expect(fromDlq[0]).toMatchObject({ id: fromJobs[0]!.id, timestamp: fromJobs[0]!.timestamp, attempts: 1 });
    expect(h.log.lines.some((l) => l.includes('outcome "exception"'))).toBe(true);
  });

  test("an explicit ack survives a throw; the rest are retried", async () => {
    await sendBatch([
      { body: { tag: "explicit", mode: "ack-then-throw", ack: false, n: 0 } },
      { body: { tag: "explicit", ack: true, n: 1 } },
      { body: { tag: "explicit", ack: false, n: 2 } },
    ]);
    const first = await waitSeen("explicit", 3);
    // Messages 0 and 2 come back (attempt 2); message 1 was acked before the throw.
    const again = await eventually(async () => {
      const got = await seenFor("explicit");
      return got.length >= 5 ? got : (h.clock.advance(5_000), undefined);
    }, "the retried messages");
    const retried = again.slice(first.length).filter((s) => s.attempts === 2).map((s) => s.body.n);
    expect(retried.sort()).toEqual([0, 2]);
    await runDry();
  });

  test("ackAll() then throw acks everything", async () => {
    await sendBatch([{ body: { tag: "ackall", mode: "ackAll-then-throw" } }, { body: { tag: "ackall" } }]);
    h.clock.advance(5_000);
    await waitSeen("ackall", 2);
    await idle();
    h.clock.advance(5_000);
    await new Promise((r) => setTimeout(r, 100));
    expect(await seenFor("ackall")).toHaveLength(2);
  });

  test("retry() after ack() does not undo the ack", async () => {
    await sendBatch([{ body: { tag: "ackretry", mode: "retry-after-ack" } }]);
    h.clock.advance(5_000);
    await waitSeen("ackretry", 1);
    await idle();
    expect(await seenFor("ackretry")).toHaveLength(1);
  });

  test("retryAll({ delaySeconds }) holds the batch back for the delay", async () => {
    await sendBatch([{ body: { tag: "later", mode: "retryAll-delay" } }]);
    h.clock.advance(5_000);
    await waitSeen("later", 1);
    const jobs = await h.cell("jobs");
    await eventually(async () => ((await jobs.counts()).delayed === 1 ? true : undefined), "a delayed retry");
    h.clock.advance(29_000);
    expect((await jobs.counts()).delayed).toBe(1);
    h.clock.advance(1_000);
    h.clock.advance(5_000);
    const both = await waitSeen("later", 2);
    expect(both[1]!.attempts).toBe(2);
    // Its second delivery retries again; let it run out into the dead-letter queue.
    await runDry();
  });

  test("v8 bodies arrive as the same structured values (Date, Map, Uint8Array)", async () => {
    await h.fetch("/send-v8", { method: "POST" });
    h.clock.advance(5_000);
    const [s] = await waitSeen("v8", 1);
    expect(s!.body).toEqual({ tag: "v8", dateOk: true, mapOk: true, bytesOk: true });
  });

  test("at most max_concurrency batches run at once", async () => {
    await idle();
    await sendBatch(Array.from({ length: 9 }, () => ({ body: { tag: "gate", mode: "gate" } })));
    await waitSeen("gate", 6);
    // Two batches of three are held at the gate; the third batch must not start.
    await new Promise((r) => setTimeout(r, 300));
    expect(await seenFor("gate")).toHaveLength(6);
    await h.fetch("/open-gate", { method: "POST" });
    await waitSeen("gate", 9);
    await idle();
  });
});
