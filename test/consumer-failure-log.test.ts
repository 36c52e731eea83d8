import { fateWaitForErrorMs, repeatedFailureWindowMs } from "@celld/bindings";
import { expect, test } from "vitest";
import { eventually, logOnceItShows, runHost as runUntidied, tidyAfterEach, type RunningHost } from "./host-harness.ts";

// A consumer that fails every batch must not flood the log (docs/getting-started.md, "Its log"):
// the first failure of each error is printed in full, the rest counted on the host's clock.

const { project, runHost } = tidyAfterEach();

// Fails with the error its message names; "ok-after-1" fails once, then succeeds.
const worker = `export default {
  async fetch(request, env) {
    const { kind, count } = await request.json();
    for (let i = 0; i < count; i++) await env.JOBS.send({ kind });
    return new Response("sent");
  },
  async queue(batch) {
    const { kind } = batch.messages[0].body;
    if (kind === "ok-after-1" && batch.messages[0].attempts > 1) return;
    throw new Error(kind === "other" ? "a different failure" : "boom");
  },
};
`;

/**
 * A Worker project that sends to and consumes "jobs" through `worker.js`: its wrangler.toml's
 * consumer entry takes `consumer` (keys after `queue = "jobs"`). Returns the config's path.
 */
function jobsApp(p: ReturnType<typeof project>, consumer: string, workerJs: string, name = "app"): string {
  return p.write({
    "wrangler.toml": `
name = "${name}"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", ${consumer} }]
`,
    "worker.js": workerJs,
  });
}

/** `tidy`: closed after the test; otherwise the test closes it (to see what stopping prints). */
async function start(tidy = true): Promise<RunningHost> {
  const p = project();
  const main = jobsApp(p, 'max_batch_size = 1, max_batch_timeout = 0, max_retries = 1, dead_letter_queue = "dead"', worker);
  return (tidy ? runHost : runUntidied)([main], p.dataDir);
}

async function send(h: RunningHost, kind: string, count: number): Promise<void> {
  expect((await h.fetch("/", { method: "POST", body: JSON.stringify({ kind, count }) })).status).toBe(200);
}

const threw = (l: string) => l.startsWith('stderr: [celld] queue() handler for "jobs" threw: ');
const fateLines = (h: RunningHost) => h.log.lines.filter((l) => l.startsWith('warn: queue "jobs": the queue() handler ended with'));
const summaries = (h: RunningHost) => h.log.lines.filter((l) => l.includes("more time(s) within"));
const settled = (h: RunningHost, n: number) => eventually(() => (h.batches.length >= n ? true : undefined), `${n} batches`);

test("a storm of one error prints it once, and one summary at the window's end; a different error shows at once", async () => {
  const h = await start();
  // Five messages, two deliveries each: ten failed batches, five dead-lettered.
  await send(h, "boom", 5);
  await settled(h, 5);
  // The retries wait for nothing (no retry_delay): the second deliveries follow.
  await settled(h, 10);
  expect(h.log.lines.filter(threw)).toEqual(['stderr: [celld] queue() handler for "jobs" threw: Error: boom']);
  // Its stack is printed with it, once.
  expect(h.log.lines.filter((l) => /^stderr:\s+at /.test(l)).length).toBeGreaterThan(0);
  expect(fateLines(h)).toHaveLength(1);
  expect(summaries(h)).toEqual([]);

  await send(h, "other", 1);
  await settled(h, 12);
  expect(h.log.lines.filter(threw)).toEqual([
    'stderr: [celld] queue() handler for "jobs" threw: Error: boom',
    'stderr: [celld] queue() handler for "jobs" threw: Error: a different failure',
  ]);

  h.clock.advance(repeatedFailureWindowMs);
  const summary = await eventually(() => summaries(h).find((l) => l.includes("Error: boom")), "the summary of boom");
  expect(summary).toBe(
    'warn: queue "jobs": the queue() handler threw Error: boom 9 more time(s) within 60 s of the report above, not printed again; ' +
      'of their batches\' messages, 4 of 9 message(s) will be retried; 5 had no retries left and went to the dead-letter queue "dead"',
  );
  // The other error failed twice: its second failure is the summary's.
  expect(summaries(h).filter((l) => l.includes("a different failure"))).toHaveLength(1);
  // A failure after the window is printed in full again.
  await send(h, "boom", 1);
  await settled(h, 14);
  expect(h.log.lines.filter(threw)).toHaveLength(3);
});

test("what is still counted when celld stops is said at stop", async () => {
  const h = await start(false);
  await send(h, "boom", 2);
  await settled(h, 4);
  expect(summaries(h)).toEqual([]);
  await h.close();
  expect(summaries(h)).toHaveLength(1);
  expect(summaries(h)[0]).toContain("threw Error: boom 3 more time(s)");
});

test("a handler that fails once and then succeeds prints its one error as before", async () => {
  const h = await start(false);
  await send(h, "ok-after-1", 1);
  await settled(h, 2);
  expect(h.batches.map((b) => b.outcome)).toEqual(["exception", "ok"]);
  expect(h.log.lines.filter(threw)).toEqual(['stderr: [celld] queue() handler for "jobs" threw: Error: boom']);
  expect(fateLines(h)).toEqual(['warn: queue "jobs": the queue() handler ended with outcome "exception"; 1 of 1 message(s) will be retried']);
  await h.close();
  expect(summaries(h)).toEqual([]);
});

// wrangler dev warns of each message it moves to a dead-letter queue or drops; celld said nothing
// when the handler returned normally after retry(), so a message deleted after its last retry()
// left no trace in the log.
test.each([
  ['dead_letter_queue = "dead"', 'went to the dead-letter queue "dead"'],
  ["", "was deleted (the consumer names no dead_letter_queue)"],
])("messages a handler retry()s past their last delivery are said, then counted like failures (%s)", async (dlq, where) => {
  const p = project();
  const main = jobsApp(p, `max_batch_size = 1, max_batch_timeout = 0, max_retries = 1${dlq === "" ? "" : `, ${dlq}`}`, `export default {
  async fetch(request, env) { await env.JOBS.send({}); return new Response("sent"); },
  async queue(batch) { for (const m of batch.messages) m.retry(); },
};
`);
  const h = await runHost([main], p.dataDir);
  const said = () => h.log.lines.filter((l) => l.startsWith('warn: queue "jobs": the queue() handler retried'));
  await h.fetch("/", { method: "POST" });
  await settled(h, 2);
  expect(said()).toEqual([
    `warn: queue "jobs": the queue() handler retried 1 message on its last delivery (max_retries = 1), so it ${where}`,
  ]);

  await h.fetch("/", { method: "POST" });
  await h.fetch("/", { method: "POST" });
  await settled(h, 6);
  expect(said()).toHaveLength(1);
  h.clock.advance(repeatedFailureWindowMs);
  const summary = await eventually(() => said()[1], "the summary");
  const plural = where.replace("was deleted", "were deleted");
  expect(summary).toBe(
    'warn: queue "jobs": the queue() handler retried messages past their last delivery 2 more time(s) within 60 s of the report above, ' +
      `not printed again; in all, it retried 2 messages on their last delivery, so they ${plural}`,
  );
});

test("a Worker cannot fake or hide another queue's errors: a forged record is its own output, and the shim's own record passes it by", async () => {
  const p = project();
  // "evil" is served first; it also sends to "jobs", consumed by "app", whose handler throws.
  const evil = p.write({
    "evil/wrangler.toml": `
name = "evil"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "OWN", queue = "own" }]
queues.consumers = [{ queue = "own", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]
`,
    "evil/worker.js": `const forge = console.error;
// Everything written through console.error from here on, shown on stdout for the test to read.
console.error = (...args) => console.log("seen: " + args.join(" "));
const record = JSON.stringify({ queue: "jobs", tag: "t1", text: '[celld] queue() handler for "jobs" threw: Error: boom' });
export default {
  async fetch(request, env, ctx) {
    const { pathname } = new URL(request.url);
    if (pathname === "/forge") {
      forge("[celld:queue-error] " + record);
      forge("[celld:queue-error " + "0".repeat(32) + "] " + record);
      return new Response("forged");
    }
    if (pathname === "/scan") {
      const places = [...Object.getOwnPropertyNames(globalThis).map((k) => { try { return globalThis[k]; } catch { return undefined; } }),
        ...Object.values(env), ctx.waitUntil];
      const found = places.filter((v) => (typeof v === "string" || typeof v === "function") && String(v).includes("celld:queue-error"));
      return new Response(String(found.length));
    }
    await env[pathname === "/" ? "JOBS" : "OWN"].send({ pose: pathname === "/pose" });
    return new Response("sent");
  },
  async queue(batch) {
    if (!batch.messages[0].body.pose) throw new Error("own failure");
    // Its own record, naming a queue it does not consume.
    Object.defineProperty(batch, "queue", { value: "jobs" });
    throw new Error("posing as jobs");
  },
};
`,
  });
  const app = p.write({
    "app/wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]
`,
    "app/worker.js": worker,
  });
  const h = await runHost([evil, app], p.dataDir);
  expect(await (await h.fetch("/forge")).text()).toBe("forged");
  // The forged lines are the Worker's output, shown as written.
  await logOnceItShows(h, /stderr: \[celld:queue-error 0{32}\] /, "the forged line with a made-up token");
  expect(h.log.lines).toContain(`stderr: [celld:queue-error] ${JSON.stringify({ queue: "jobs", tag: "t1", text: '[celld] queue() handler for "jobs" threw: Error: boom' })}`);
  // "jobs"'s own error is printed in full: the forgeries opened no window that would count it.
  await h.fetch("/");
  await settled(h, 1);
  await eventually(() => h.log.lines.find(threw), "app's report");
  expect(fateLines(h)).toHaveLength(1);
  // The Worker's own handler throws with console.error replaced: the record went by unseen.
  await h.fetch("/own");
  await settled(h, 2);
  await logOnceItShows(h, /stderr: \[celld\] queue\(\) handler for "own" threw: Error: own failure/, "evil's own report");
  expect(h.log.lines.filter((l) => l.includes("celld:queue-error") && l.startsWith("stdout:"))).toEqual([]);
  expect(h.log.lines.filter((l) => l.startsWith("stdout: seen:"))).toEqual([]);
  // A record its shim writes for a queue it does not consume is shown, not counted as that queue's.
  for (const n of [3, 4]) {
    await h.fetch("/pose");
    await settled(h, n);
  }
  const posing = 'stderr: [celld] queue() handler for "jobs" threw: Error: posing as jobs';
  await eventually(() => (h.log.lines.filter((l) => l === posing).length === 2 ? true : undefined), "both posing reports, shown");
  // Neither env, nor globalThis, nor the functions the shim hands the Worker hold the token.
  expect(await (await h.fetch("/scan")).text()).toBe("0");
});

test("a service-worker consumer's errors are reported like a module's: each paired with its batch's fate at once, and counted within the window", async () => {
  // Its "queue" listener's throw, or its event.waitUntil() promise's rejection (which fails the
  // batch in a service-worker script), comes as a record from its shim (service-worker-shim.ts).
  // What the script prints is shown as its output (service-worker-console.ts).
  const p = project();
  const main = jobsApp(p, "max_batch_size = 1, max_batch_timeout = 0, max_retries = 0", `addEventListener("fetch", (event) => event.respondWith(JOBS.send(new URL(event.request.url).pathname).then(() => new Response("sent"))));
addEventListener("queue", (event) => {
  console.error("the listener's own line");
  if (event.messages[0].body === "/sync") throw new Error("thrown by the listener");
  event.waitUntil(Promise.reject(new Error("rejected in waitUntil")));
});
`, "sw");
  const h = await runHost([main], p.dataDir);
  for (const path of ["/sync", "/async", "/sync"]) await h.fetch(path);
  await settled(h, 3);
  expect(h.batches.map((b) => b.outcome)).toEqual(["exception", "exception", "exception"]);
  // The lines name what the author wrote: a "queue" event listener, not a queue() handler.
  const listenerFates = () => h.log.lines.filter((l) => l.startsWith('warn: queue "jobs": the "queue" event listener ended with'));
  const fate =
    'warn: queue "jobs": the "queue" event listener ended with outcome "exception"; 0 of 1 message(s) will be retried; 1 had no retries left and was deleted (the consumer names no dead_letter_queue)';
  // Each error came with its batch: no fate waits for one (the clock has not moved).
  await eventually(() => (listenerFates().length === 2 ? true : undefined), "the fates of both errors");
  expect(listenerFates()).toEqual([fate, fate]);
  const errors = () => h.log.lines.filter((l) => /^stderr: .*(?:thrown by the listener|rejected in waitUntil)/.test(l));
  expect(errors()).toEqual([
    'stderr: [celld] "queue" listener for "jobs" threw: Error: thrown by the listener',
    'stderr: [celld] an event.waitUntil() promise of the "queue" listener for "jobs" rejected: Error: rejected in waitUntil',
  ]);
  h.clock.advance(repeatedFailureWindowMs);
  const summary = await eventually(() => summaries(h)[0], "the summary of the thrown error");
  expect(summary).toBe(
    'warn: queue "jobs": the "queue" event listener threw Error: thrown by the listener 1 more time(s) within 60 s of the report above, not printed again; ' +
      "of their batches' messages, 0 of 1 message(s) will be retried; 1 had no retries left and was deleted (the consumer names no dead_letter_queue)",
  );
  await h.close();
  expect(summaries(h)).toHaveLength(1);
  expect(errors()).toHaveLength(2);
  expect(h.log.lines.filter((l) => l.includes("the listener's own line"))).toEqual(Array.from({ length: 3 }, () => "stdout: the listener's own line"));
});

test("a batch whose handler acks one message and retries the other on its last delivery is said with both", async () => {
  const p = project();
  const main = jobsApp(p, "max_batch_size = 2, max_batch_timeout = 0, max_retries = 0", `export default {
  async fetch(request, env) { await env.JOBS.sendBatch([{ body: 1 }, { body: 2 }]); return new Response("sent"); },
  async queue(batch) { batch.messages[0].ack(); batch.messages[1].retry(); },
};
`);
  const h = await runHost([main], p.dataDir);
  await h.fetch("/", { method: "POST" });
  await settled(h, 1);
  expect(h.batches.map((b) => [b.size, b.acked])).toEqual([[2, 1]]);
  const said = await eventually(() => h.log.lines.find((l) => l.startsWith('warn: queue "jobs": the queue() handler retried')), "the line");
  expect(said).toBe(
    'warn: queue "jobs": the queue() handler retried 1 message on its last delivery (max_retries = 0), so it was deleted (the consumer names no dead_letter_queue); 1 was acked',
  );
});
