import { expect, test } from "vitest";
import { drainJson, eventually, tidyAfterEach } from "./host-harness.ts";

const { project, runHost } = tidyAfterEach();

// Where real Workers call send() besides a fetch handler's own await: from a Durable Object, in
// ctx.waitUntil after the response has gone, and from a queue() handler passing work on. Each
// reaches the cell through the same producer binding, so each must commit before it resolves.
const worker = `
import { DurableObject } from "cloudflare:workers";

export class Counter extends DurableObject {
  async bump(tag) {
    const n = ((await this.ctx.storage.get("n")) ?? 0) + 1;
    await this.ctx.storage.put("n", n);
    await this.env.JOBS.send({ from: "durable-object", tag, n });
    return n;
  }
}

export default {
  async fetch(request, env, ctx) {
    const { pathname } = new URL(request.url);
    if (pathname === "/object") {
      const n = await env.COUNTER.get(env.COUNTER.idFromName("one")).bump("object");
      return Response.json({ n });
    }
    if (pathname === "/later") {
      ctx.waitUntil(env.JOBS.send({ from: "wait-until" }));
      return new Response("answered before the send");
    }
    return new Response("no route", { status: 404 });
  },
  async queue(batch, env) {
    // jobs -> done: each message passes on with its delivery count, in one sendBatch.
    await env.DONE.sendBatch(batch.messages.map((m) => ({ body: { ...m.body, attempts: m.attempts } })));
  },
};
`;

test("send() from a Durable Object, in ctx.waitUntil, and from a queue() handler all reach the cell", async () => {
  const p = project();
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
durable_objects.bindings = [{ name = "COUNTER", class_name = "Counter" }]
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "DONE", queue = "done" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 10, max_batch_timeout = 0 }]
`,
    "worker.js": worker,
  });
  const h = await runHost([config], p.dataDir);

  expect(await (await h.fetch("/object")).json()).toEqual({ n: 1 });
  expect(await (await h.fetch("/object")).json()).toEqual({ n: 2 });
  const later = await h.fetch("/later");
  expect(await later.text()).toBe("answered before the send");

  // Everything sent to jobs is consumed and passed on to done, which has no consumer.
  const done = await h.cell("done");
  const seen: unknown[] = [];
  await eventually(async () => {
    seen.push(...(await drainJson(done)));
    return seen.length >= 3 ? true : undefined;
  }, "three messages passed on to done");
  expect(seen).toHaveLength(3);
  expect(seen).toEqual(
    expect.arrayContaining([
      { from: "durable-object", tag: "object", n: 1, attempts: 1 },
      { from: "durable-object", tag: "object", n: 2, attempts: 1 },
      { from: "wait-until", attempts: 1 },
    ]),
  );
  // Nothing is left behind in jobs: each batch was acked once its sendBatch had committed.
  const jobs = await h.cell("jobs");
  await eventually(async () => ((await jobs.counts()).leased === 0 ? true : undefined), "the last batch to be settled");
  expect(await jobs.counts()).toMatchObject({ ready: 0, leased: 0, dead: 0 });
});
