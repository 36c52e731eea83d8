import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ManualClock } from "@celld/queue-cell";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { drainJson, eventually, project, runHost, seenReports, tidyAfterEach, type RunningHost } from "./host-harness.ts";

// What real queue() handlers do that tidy ones do not, run through workerd as Cloudflare runs
// them. workerd records the calls; celld settles them (docs/batching-and-retries.md).

interface Seen {
  queue: string;
  id: string;
  attempts: number;
  timestamp: number;
  kind: string;
  body: ({ tag?: string } & Record<string, unknown>) | null;
  thrown: string[];
}

const fixture = readFileSync(join(import.meta.dirname, "fixtures", "odd-handlers-worker.js"), "utf8");

// A consumer Worker with no fetch() handler, which reports what it was given.
const queueOnlyWorker = `export default {
  async queue(batch, env) {
    for (const m of batch.messages) {
      const body = typeof m.body === "string" && m.body.length > 1000 ? { length: m.body.length, allX: /^x*$/.test(m.body) } : m.body;
      await env.SEEN.send({ queue: batch.queue, id: m.id, attempts: m.attempts, timestamp: m.timestamp.getTime(), kind: typeof m.body, body, thrown: [] });
    }
  },
};
`;

describe("odd queue() handlers", () => {
  const p = project();
  let h: RunningHost;
  const seen = seenReports<Seen>(() => h.cell("seen"));
  const { forTag: seenFor, waitFor: waitSeen } = seen;

  beforeAll(async () => {
    const main = p.write({
      "app/wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"

[[queues.producers]]
binding = "JOBS"
queue = "jobs"

[[queues.producers]]
binding = "SEEN"
queue = "seen"

[[queues.producers]]
binding = "OTHER"
queue = "other"

[[queues.producers]]
binding = "BIG"
queue = "big"

# A retry that names no delay waits 20 s, so a delay of 0 is told apart from none.
[[queues.consumers]]
queue = "jobs"
max_batch_size = 1
max_batch_timeout = 0
max_retries = 1
retry_delay = 20
`,
      "app/worker.js": fixture,
      "queue-only/wrangler.toml": `
name = "queue-only"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "other", max_batch_timeout = 0 }, { queue = "big", max_batch_size = 100, max_batch_timeout = 60 }]
`,
      "queue-only/worker.js": queueOnlyWorker,
    });
    h = await runHost([main, join(p.dir, "queue-only/wrangler.toml")], p.dataDir, { wallTimeSeconds: 60 });
  });

  afterAll(async () => {
    await h?.close();
    p.remove();
  });

  async function send(body: unknown, binding = "JOBS"): Promise<void> {
    const res = await h.fetch("/send", { method: "POST", body: JSON.stringify({ body, binding }) });
    expect(res.status, await res.text()).toBe(200);
  }

  /** Waits until no message of the queue is in a batch, and returns its counts then. */
  async function settled(queue = "jobs"): Promise<{ ready: number; delayed: number; leased: number }> {
    const cell = await h.cell(queue);
    return eventually(async () => {
      const c = await cell.counts();
      return c.leased === 0 ? c : undefined;
    }, `the batches of ${queue} to be settled`);
  }

  async function empty(queue = "jobs"): Promise<void> {
    const cell = await h.cell(queue);
    await eventually(async () => {
      const c = await cell.counts();
      return c.ready + c.leased + c.delayed === 0 ? true : undefined;
    }, `queue ${queue} to be empty`);
  }

  /**
   * Sends one message whose first delivery does `body.mode`, and returns its deliveries once the
   * queue is empty: `retriedAfter` seconds of (fake) time bring a retry back, undefined for none.
   */
  async function deliveries(tag: string, body: Record<string, unknown>, retriedAfter: number | undefined): Promise<Seen[]> {
    await send({ tag, ...body });
    await waitSeen(tag, 1);
    const counts = await settled();
    if (retriedAfter === undefined) {
      expect(counts).toMatchObject({ ready: 0, delayed: 0 });
    } else if (retriedAfter > 0) {
      expect(counts).toMatchObject({ delayed: 1 });
      h.clock.advance(retriedAfter * 1000 - 1);
      expect(await (await h.cell("jobs")).counts()).toMatchObject({ delayed: 1 });
      h.clock.advance(1);
    }
    if (retriedAfter !== undefined) await waitSeen(tag, 2);
    await empty();
    return seenFor(tag);
  }

  // workerd converts delaySeconds to a 32-bit integer before celld sees it (as on Cloudflare);
  // celld clamps what arrives into 0 to 86,400. The consumer's retry_delay (20) is not used.
  const retryDelays: Array<{ delay: string | number; seconds: number }> = [
    { delay: "nan", seconds: 0 },
    { delay: "badString", seconds: 0 },
    { delay: "infinity", seconds: 0 },
    { delay: "null", seconds: 0 },
    { delay: "negative", seconds: 0 },
    { delay: "fraction", seconds: 2 },
    { delay: "string", seconds: 7 },
    { delay: "over", seconds: 86_400 },
  ];
  for (const { delay, seconds } of retryDelays) {
    for (const mode of ["retry-delay", "retryAll-delay"]) {
      test(`${mode === "retry-delay" ? "retry" : "retryAll"}({ delaySeconds: ${delay} }) brings the message back after ${seconds} s`, async () => {
        const got = await deliveries(`${mode} ${delay}`, { mode, delay }, seconds);
        expect(got.map((s) => [s.attempts, s.thrown])).toEqual([
          [1, []],
          [2, []],
        ]);
      });
    }
  }

  test("retry({ delaySeconds: 1e12 }) throws a TypeError in the handler; a handler that catches it and returns acks", async () => {
    const got = await deliveries("retry huge", { mode: "retry-delay", delay: "huge" }, undefined);
    expect(got).toHaveLength(1);
    expect(got[0]!.thrown).toEqual(["retry: TypeError: Value out of range. Must be between -2147483648 and 2147483647 (inclusive)."]);
  });

  const twice: Array<{ calls: string[]; retriedAfter: number | undefined }> = [
    { calls: ["ack", "ack", "retry", "retry"], retriedAfter: undefined },
    { calls: ["retry", "retry", "ack", "ack"], retriedAfter: 20 },
    { calls: ["retry", "ack", "retry"], retriedAfter: 20 },
  ];
  for (const { calls, retriedAfter } of twice) {
    test(`${calls.map((c) => `${c}()`).join(", ")}: the first call wins`, async () => {
      const got = await deliveries(`twice ${calls.join()}`, { mode: "twice", calls }, retriedAfter);
      expect(got.map((s) => s.attempts)).toEqual(retriedAfter === undefined ? [1] : [1, 2]);
    });
  }

  test("ack() inside ctx.waitUntil() after the handler threw: acked (workerd waits for waitUntil)", async () => {
    const got = await deliveries("waitUntil ack", { mode: "wait-until-ack" }, undefined);
    expect(got).toHaveLength(1);
    expect(h.log.lines).toContain('warn: queue "jobs": the queue() handler ended with outcome "exception"; 0 of 1 message(s) will be retried; 1 was acked');
  });

  test("retry() inside ctx.waitUntil() after the handler returned: retried", async () => {
    const got = await deliveries("waitUntil retry", { mode: "wait-until-retry" }, 20);
    expect(got.map((s) => s.attempts)).toEqual([1, 2]);
  });

  // What the log shows of a thrown value that is not a plain Error: the value itself, not
  // "[object Object]", and an Error's causes, which say what went wrong first.
  const thrown: Array<{ what: string; mode: string; printed: string[] }> = [
    { what: "a string", mode: "throw-string", printed: ["a plain string"] },
    { what: "undefined", mode: "throw-undefined", printed: ["undefined"] },
    { what: "a plain object", mode: "throw-object", printed: ['{"code":42,"detail":"a plain object"}'] },
    {
      what: "an Error with causes",
      mode: "throw-with-cause",
      printed: ["Error: could not save", "Caused by: TypeError: the store said no", "Caused by: a string at the root"],
    },
  ];
  for (const { what, mode, printed } of thrown) {
    test(`a handler that throws ${what}: retried, and the value is in the log`, async () => {
      const mark = h.log.lines.length;
      const got = await deliveries(mode, { mode }, 20);
      expect(got.map((s) => s.attempts)).toEqual([1, 2]);
      const lines = h.log.lines.slice(mark);
      const first = lines.findIndex((l) => l.startsWith('stderr: [celld] queue() handler for "jobs" threw: '));
      expect(lines[first]).toBe(`stderr: [celld] queue() handler for "jobs" threw: ${printed[0]}`);
      // The stack lines between are the error's own and its causes'.
      const rest = lines.slice(first + 1).filter((l) => !/^stderr:\s+at /.test(l));
      expect(rest.slice(0, printed.length - 1)).toEqual(printed.slice(1).map((p) => `stderr: ${p}`));
    });
  }

  test("a handler that rejects after ackAll(): acked", async () => {
    expect(await deliveries("reject", { mode: "reject-after-ackAll" }, undefined)).toHaveLength(1);
  });

  test("a handler that returns a value: acked, the value ignored", async () => {
    expect(await deliveries("returns", { mode: "return-value" }, undefined)).toHaveLength(1);
  });

  test("a handler's console.log and console.error reach celld's log as stdout and stderr", async () => {
    await deliveries("log", { mode: "log", text: "hello there" }, undefined);
    await eventually(() => (h.log.lines.includes("stderr: handler warns: hello there") ? true : undefined), "the stderr line");
    expect(h.log.lines).toContain("stdout: handler says: hello there");
  });

  test("queue() sends to its own queue and to another: both messages are delivered", async () => {
    await send({ tag: "chain", mode: "chain", binding: "JOBS" });
    const own = await waitSeen("chain", 2);
    expect(own.map((s) => [s.queue, s.body?.["hop"]])).toEqual([
      ["jobs", undefined],
      ["jobs", 1],
    ]);
    await send({ tag: "chain-other", mode: "chain", binding: "OTHER" });
    const other = await waitSeen("chain-other", 2);
    // The other queue's consumer is a Worker with no fetch() handler.
    expect(other.map((s) => [s.queue, s.body?.["hop"]])).toEqual([
      ["jobs", undefined],
      ["other", 1],
    ]);
    await empty();
    await empty("other");
  });

  test("a batch of 100 messages of 128,000 bytes each reaches the handler whole", async () => {
    const body = "x".repeat(128_000 - 2); // a JSON string: two quotes
    for (let i = 0; i < 50; i++) {
      const res = await h.fetch("/send-batch", { method: "POST", body: JSON.stringify({ binding: "BIG", messages: [{ body }, { body }] }) });
      expect(res.status).toBe(200);
    }
    await empty("big");
    const reports = h.batches.filter((b) => b.queue === "big");
    expect(reports).toEqual([
      { queue: "big", size: 100, acked: 100, retried: 0, deadLettered: 0, outcome: "ok", durationMs: expect.any(Number), ackedAgesMs: expect.any(Array) },
    ]);
    expect(reports[0]!.ackedAgesMs).toHaveLength(100);
    const got = (await seen.since(0)).filter((s) => s.queue === "big");
    expect(got).toHaveLength(100);
    expect(new Set(got.map((s) => JSON.stringify(s.body)))).toEqual(new Set([JSON.stringify({ length: 127_998, allX: true })]));
  });
});

describe("celld restarts", () => {
  const tidy = tidyAfterEach();

  test("between a retry and its redelivery: the message comes back with attempts 2, the same id and timestamp", async () => {
    const p = tidy.project();
    const config = p.write({
      "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0 }]
`,
      "worker.js": fixture,
    });
    // Closed here, not by tidy: a host is closed once.
    const first = await runHost([config], p.dataDir);
    let before: Seen[];
    let now: number;
    try {
      await first.fetch("/send", { method: "POST", body: JSON.stringify({ body: { tag: "restart", mode: "retry-delay", delay: 30 } }) });
      const jobs = await first.cell("jobs");
      await eventually(async () => ((await jobs.counts()).delayed === 1 ? true : undefined), "the delayed retry");
      before = (await drainJson(await first.cell("seen"))) as Seen[];
      now = first.clock.now();
    } finally {
      await first.close();
    }

    const second = await tidy.runHost([config], p.dataDir, { clock: new ManualClock(now) });
    second.clock.advance(30_000);
    const seen = await second.cell("seen");
    await eventually(async () => ((await seen.counts()).ready === 1 ? true : undefined), "the redelivery");
    const after = (await drainJson(seen)) as Seen[];
    expect(before.map((s) => s.attempts)).toEqual([1]);
    expect(after).toMatchObject([{ id: before[0]!.id, timestamp: before[0]!.timestamp, attempts: 2 }]);
  });
});
