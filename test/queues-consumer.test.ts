import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repeatedFailureWindowMs } from "@celld/bindings";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { eventually, project, runHost, seenReports, type RunningHost } from "./host-harness.ts";

interface Seen {
  queue: string;
  id: string;
  attempts: number;
  timestamp: number;
  timestampIsDate: boolean;
  /** typeof the body inside queue(), or "ArrayBuffer". */
  kind: string;
  size: number;
  /** batch.metadata.metrics, its Date spelled out as { date: ms }. */
  metrics: unknown;
  body: { tag?: string; mode?: string; n?: number } & Record<string, unknown>;
}

/** What the fixture's "calls" mode does on a first delivery: [method, its options]. */
type Call = [name: "ack" | "retry" | "ackAll" | "retryAll" | "throw", options?: { delaySeconds: number }];

const fixture = (name: string): string => readFileSync(join(import.meta.dirname, "fixtures", name), "utf8");

describe("a consumer Worker in workerd", () => {
  const p = project();
  let h: RunningHost;
  const seen = seenReports<Seen>(() => h.cell("seen"));
  const { forTag: seenFor, waitFor: waitSeen, since: seenSince, mark: seenMark } = seen;

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

# For the retry_delay tests: a retried message waits 20 s unless the call names a delay.
[[queues.producers]]
binding = "SLOW"
queue = "slow"

[[queues.consumers]]
queue = "slow"
max_batch_size = 1
max_batch_timeout = 0
retry_delay = 20
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

  async function send(body: unknown, options?: unknown, binding = "JOBS"): Promise<void> {
    const res = await h.fetch("/send", { method: "POST", body: JSON.stringify({ body, options, binding }) });
    expect(res.status).toBe(200);
  }

  async function sendBatch(messages: unknown[], options?: unknown): Promise<void> {
    const res = await h.fetch("/send-batch", { method: "POST", body: JSON.stringify({ messages, options }) });
    expect(res.status).toBe(200);
  }

  /** Waits until no message of the queue is in a batch, and returns its counts then. */
  async function settled(queue: string): Promise<{ ready: number; delayed: number }> {
    const cell = await h.cell(queue);
    return eventually(async () => {
      const c = await cell.counts();
      return c.leased === 0 ? c : undefined;
    }, `the batches of ${queue} to be settled`);
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
    // Said in the batch's own line, or, when an earlier batch of this host failed alike within the
    // window, in the window's summary: both end saying where the message went.
    h.clock.advance(repeatedFailureWindowMs);
    await eventually(() => h.log.lines.some((l) => / had no retries left and went to the dead-letter queue "jobs-dlq"$/.test(l)) || undefined, "the dead-letter line");
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

  test("text bodies arrive as the same strings, from send() and sendBatch()", async () => {
    await idle();
    const mark = await seenMark();
    // JSON-looking text must stay a string; non-ASCII must survive the UTF-8 trip both ways; a
    // leading byte-order mark is part of the string, as workerd's own consumer hands it over.
    const texts = ['{"tag":"text","n":1}', "ünïcödé ✓ 😀\n\tend", "", "\uFEFFbom"];
    await send(texts[0], { contentType: "text" });
    await sendBatch([
      { body: texts[1], contentType: "text" },
      { body: texts[2], contentType: "text" },
      { body: texts[3], contentType: "text" },
    ]);
    h.clock.advance(5_000);
    const got = await eventually(async () => {
      const all = await seenSince(mark);
      return all.length >= 4 ? all : undefined;
    }, "the four text messages");
    expect(got.map((s) => [s.kind, s.body]).sort()).toEqual(texts.map((t) => ["string", t]).sort());
    await idle();
  });

  test("batch.metadata.metrics is the queue's backlog at hand-over; message.timestamp is a Date", async () => {
    await idle();
    const bodies = [0, 1, 2, 3].map((n) => ({ tag: "metrics", n }));
    const bytes = new TextEncoder().encode(JSON.stringify(bodies[0])).byteLength;
    // A full batch of three goes at once; the fourth waits in the backlog for its own window.
    const mark = h.batches.length;
    await sendBatch(bodies.map((body) => ({ body })));
    await waitSeen("metrics", 3);
    // The fourth opens the next window, leased, so "settled" is the host's report of the first.
    await eventually(() => h.batches.slice(mark).find((b) => b.queue === "jobs"), "the first batch to be settled");
    h.clock.advance(5_000);
    const all = await waitSeen("metrics", 4);
    const sentAt = all[0]!.timestamp;
    // One sendBatch: one timestamp, which is also the oldest in the backlog.
    expect(all.map((s) => s.timestamp)).toEqual([sentAt, sentAt, sentAt, sentAt]);
    expect(all.map((s) => s.timestampIsDate)).toEqual([true, true, true, true]);
    const oldest = { date: sentAt };
    // The backlog counts the batch being handed over, and the message still waiting.
    expect(all.slice(0, 3).map((s) => s.metrics)).toEqual(
      Array(3).fill({ backlogCount: 4, backlogBytes: 4 * bytes, oldestMessageTimestamp: oldest }),
    );
    expect(all[3]!.metrics).toEqual({ backlogCount: 1, backlogBytes: bytes, oldestMessageTimestamp: oldest });
    await idle();
  });

  test("message.retry({ delaySeconds }) brings that message back after the delay; the rest are acked", async () => {
    await idle();
    await sendBatch([
      { body: { tag: "retry-some", mode: "retry-some", retry: false, n: 0 } },
      { body: { tag: "retry-some", retry: true, n: 1 } },
      { body: { tag: "retry-some", retry: false, n: 2 } },
    ]);
    await waitSeen("retry-some", 3);
    expect(await settled("jobs")).toMatchObject({ ready: 0, delayed: 1 });
    h.clock.advance(9_999);
    expect(await (await h.cell("jobs")).counts()).toMatchObject({ ready: 0, delayed: 1 });
    h.clock.advance(1);
    // Available again, it opens a batch window of its own (max_batch_timeout = 5).
    h.clock.advance(5_000);
    const all = await waitSeen("retry-some", 4);
    expect(all[3]).toMatchObject({ attempts: 2, body: { n: 1 } });
    await idle();
    expect(await seenFor("retry-some")).toHaveLength(4);
  });

  // The cases of docs/batching-and-retries.md's table that the tests above do not cover. The first
  // call for a message wins; where workerd reports both calls, the host settles by its rules.
  // `dropped`: workerd itself ignores the second call, and says so for each message.
  const precedence: Array<{ name: string; calls: Call[]; result: "acked" | "retried"; dropped: boolean }> = [
    { name: "retry() then ack()", calls: [["retry"], ["ack"]], result: "retried", dropped: true },
    { name: "retry() then ackAll()", calls: [["retry"], ["ackAll"]], result: "retried", dropped: false },
    { name: "ackAll() then retry()", calls: [["ackAll"], ["retry"]], result: "acked", dropped: true },
    { name: "retryAll() then ack()", calls: [["retryAll"], ["ack"]], result: "retried", dropped: true },
    { name: "ack() then retryAll()", calls: [["ack"], ["retryAll"]], result: "acked", dropped: false },
  ];

  for (const { name, calls, result, dropped } of precedence) {
    test(`${name}: ${result}`, async () => {
      await idle();
      const tag = `precedence: ${name}`;
      // A full batch goes at once, and so does its retry (retry_delay = 0): no clock needed.
      await sendBatch([0, 1, 2].map((n) => ({ body: { tag, mode: "calls", calls, n } })));
      const first = await waitSeen(tag, 3);
      if (dropped) {
        const [[earlier], [later]] = calls as [Call, Call];
        const warning = `Calling ${later}() on a message after calling ${earlier}() has no effect.`;
        const ids = first.filter((s) => s.attempts === 1).map((s) => `on message ${s.id} after`);
        await eventually(() => {
          const lines = h.log.lines.filter((l) => l.endsWith(warning));
          return ids.every((id) => lines.some((l) => l.includes(id))) ? true : undefined;
        }, `workerd's "${warning}" for each message`);
      }
      if (result === "retried") {
        const all = await waitSeen(tag, 6);
        const ids = (attempts: number): string[] => all.filter((s) => s.attempts === attempts).map((s) => s.id).sort();
        expect(ids(2)).toEqual(ids(1));
        expect(ids(2)).toHaveLength(3);
      }
      // Once the queue is empty nothing more can come back.
      await idle();
      expect(await seenFor(tag)).toHaveLength(result === "retried" ? 6 : 3);
    });
  }

  // The "slow" consumer has retry_delay = 20; a delay named by the call replaces it, even 0.
  const retryDelay: Array<{ name: string; calls: Call[]; seconds: number }> = [
    { name: "a handler that throws", calls: [["throw"]], seconds: 20 },
    { name: "retry()", calls: [["retry"]], seconds: 20 },
    { name: "retryAll()", calls: [["retryAll"]], seconds: 20 },
    { name: "retry({ delaySeconds: 0 })", calls: [["retry", { delaySeconds: 0 }]], seconds: 0 },
    { name: "retryAll({ delaySeconds: 0 })", calls: [["retryAll", { delaySeconds: 0 }]], seconds: 0 },
    { name: "retry({ delaySeconds: 5 })", calls: [["retry", { delaySeconds: 5 }]], seconds: 5 },
  ];

  for (const { name, calls, seconds } of retryDelay) {
    test(`with retry_delay = 20, ${name} brings the message back after ${seconds} s`, async () => {
      const tag = `retry_delay: ${name}`;
      await send({ tag, mode: "calls", calls }, undefined, "SLOW");
      await waitSeen(tag, 1);
      if (seconds > 0) {
        expect(await settled("slow")).toMatchObject({ ready: 0, delayed: 1 });
        h.clock.advance(seconds * 1000 - 1);
        expect(await (await h.cell("slow")).counts()).toMatchObject({ ready: 0, delayed: 1 });
        h.clock.advance(1);
      }
      const both = await waitSeen(tag, 2);
      expect(both[1]!.attempts).toBe(2);
      await idle("slow");
    });
  }

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
