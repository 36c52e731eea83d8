import { expect, test } from "vitest";
import { eventually, tidyAfterEach } from "./host-harness.ts";

const { project, runHost } = tidyAfterEach();

/**
 * Only errors that escape a handler are reported: a consumer whose outbound fetch() fails, caught
 * in a try after other work (so workerd first calls its promise an unhandled rejection, then a
 * handled one), runs with outcome "ok" and leaves no warning or error line.
 */
test("a consumer whose outbound fetch fails and is caught late: outcome ok, no warning", { timeout: 120_000 }, async () => {
  const p = project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n[[queues.producers]]\nbinding = "Q"\nqueue = "jobs"\n[[queues.consumers]]\nqueue = "jobs"\nmax_batch_timeout = 0\nmax_batch_size = 1\n`,
    "worker.js": `
export default {
  async fetch(req, env) { await env.Q.send({ a: 1 }); return new Response("sent"); },
  async queue(batch, env) {
    for (const m of batch.messages) {
      const late = fetch("http://127.0.0.1:9/unreachable");
      await new Promise((r) => setTimeout(r, 50));
      await env.Q.send({ b: 2 }).catch(() => {});
      try {
        await late;
      } catch (error) {
        console.log("handled: " + error.message);
      }
      m.ack();
    }
  },
};`,
  });
  const h = await runHost([config], p.dataDir);
  await h.fetch("/");
  const [batch] = await eventually(() => (h.batches.length > 0 ? h.batches : undefined), "the batch");
  await eventually(() => h.log.lines.find((l) => l.includes("handled:")), "the handled line");
  expect(batch).toMatchObject({ outcome: "ok", acked: 1 });
  expect(h.log.lines.filter((l) => l.startsWith("warn:") || l.startsWith("error:") || l.includes("unhandled promise rejection"))).toEqual([]);
});

/**
 * The same for a service-worker script: its listeners return at once and go on in the promises they
 * give event.waitUntil() and event.respondWith(), so a rejection is held until those have settled.
 */
test("a service-worker consumer whose outbound fetch fails and is caught late: outcome ok, no warning", { timeout: 120_000 }, async () => {
  const p = project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n[[queues.producers]]\nbinding = "Q"\nqueue = "jobs"\n[[queues.consumers]]\nqueue = "jobs"\nmax_batch_timeout = 0\nmax_batch_size = 1\n`,
    "worker.js": `
addEventListener("fetch", (event) => {
  event.respondWith(Q.send({ a: 1 }).then(() => new Response("sent")));
});
addEventListener("queue", (event) => {
  event.waitUntil((async () => {
    for (const m of event.messages) {
      const late = fetch("http://127.0.0.1:9/unreachable");
      await new Promise((r) => setTimeout(r, 50));
      await Q.send({ b: 2 }).catch(() => {});
      try {
        await late;
      } catch (error) {
        console.log("handled: " + error.message);
      }
      m.ack();
    }
  })());
});
`,
  });
  const h = await runHost([config], p.dataDir);
  await h.fetch("/");
  const [batch] = await eventually(() => (h.batches.length > 0 ? h.batches : undefined), "the batch");
  await eventually(() => h.log.lines.find((l) => l.includes("handled:")), "the handled line");
  expect(batch).toMatchObject({ outcome: "ok", acked: 1 });
  // The shim's report goes to workerd's stderr: none for a rejection the listener caught.
  expect(h.log.lines.filter((l) => l.startsWith("warn:") || l.startsWith("error:") || l.includes("unhandled promise rejection"))).toEqual([]);
});
