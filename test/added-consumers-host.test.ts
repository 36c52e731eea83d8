import { expect, test } from "vitest";
import { AddedConsumers, type AddedConsumer } from "../packages/runtime/src/plugins/added-consumers.ts";
import { eventually, tidyAfterEach } from "./host-harness.ts";

const { project, runHost } = tidyAfterEach();

// The host's side of consumers added through the API (plugins/added-consumers.ts), with real
// workerd and no API: what runs, what is kept but not run (and said once), and a change of the
// list starting, restarting and stopping dispatchers while the Workers run.
const config = `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"

[[queues.producers]]
binding = "JOBS"
queue = "jobs"

[[queues.producers]]
binding = "OWNED"
queue = "owned"

[[queues.consumers]]
queue = "owned"
max_batch_timeout = 0
`;

const worker = `export default {
  async fetch(request, env) {
    await env.JOBS.send(new URL(request.url).searchParams.get("m"), { contentType: "text" });
    return new Response("sent");
  },
  async queue(batch) {
    for (const message of batch.messages) console.log("consumed " + batch.queue + ": " + message.body);
  },
};
`;

function consumer(id: string, queue: string, worker: string, maxBatchSize = 10): AddedConsumer {
  return {
    consumerId: id,
    cell: queue,
    queue,
    type: "worker",
    policy: { maxDeliveries: 4, deadLetter: { kind: "delete" } },
    push: { worker, maxBatchSize, maxBatchTimeoutSeconds: 0, maxConcurrency: 1, retryDelaySeconds: 0 },
  };
}

test("added Worker consumers run, change and stop with the list; one for an absent Worker or a config-owned queue is said once and not run", { timeout: 120_000 }, async () => {
  const p = project();
  const path = p.write({ "wrangler.toml": config, "worker.js": worker });
  const jobs = consumer("c-jobs", "jobs", "app");
  const ghost = consumer("c-ghost", "later", "ghost");
  const owned = consumer("c-owned", "owned", "app");
  const added = new AddedConsumers([jobs, ghost, owned]);
  const h = await runHost([path], p.dataDir, { addedConsumers: added });
  const consumed = (body: string) => eventually(() => h.log.lines.find((l) => l.includes(`consumed jobs: ${body}`)), `"${body}" consumed`, 30_000);

  await h.fetch("/?m=one");
  await consumed("one");
  expect(h.log.lines).toContain('info: queue "jobs" -> consumer "app" (added through the API)');
  const warnings = h.log.lines.filter((l) => l.startsWith("warn:"));
  expect(warnings).toEqual([
    'warn: queue "later": the consumer "ghost" added through the API is not run: Worker "ghost" does not run here; it runs once a deployment has that Worker',
    'warn: queue "owned": the consumer "app" added through the API is not run: the Workers config declares a consumer of its own for queue "owned", which runs instead',
  ]);
  expect(added.runs("app")).toBe(true);
  expect(added.runs("ghost")).toBe(false);

  // Told again (any API change): nothing said twice; a change of settings restarts it.
  await added.set([{ ...jobs, push: { ...jobs.push!, maxBatchSize: 2 } }, ghost, owned]);
  expect(h.log.lines.filter((l) => l.startsWith("warn:"))).toEqual(warnings);
  await h.fetch("/?m=two");
  await consumed("two");

  // Removed: stopped before set() resolves, so what is sent after waits in the queue.
  await added.set([ghost, owned]);
  await h.fetch("/?m=three");
  const cell = await h.cell("jobs");
  expect(await cell.counts()).toMatchObject({ ready: 1 });
  expect(h.log.lines.some((l) => l.includes("consumed jobs: three"))).toBe(false);
});
