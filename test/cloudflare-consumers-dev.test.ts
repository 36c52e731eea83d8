import { execFileSync } from "node:child_process";
import Cloudflare from "cloudflare";
import { request } from "undici";
import { expect, test } from "vitest";
import { wranglerAgainst } from "../packages/runtime/test/wrangler-cli.ts";
import { celld, waitFor, type Run } from "./cli-harness.ts";
import { devScratchAfterEach } from "./dev-cli.ts";
import type { Project } from "./host-harness.ts";

// Issue #31: consumers added through Cloudflare's API (the real wrangler 4.86.0 and SDK 7.3.0)
// against `celld dev --api-port`: a Worker consumer runs without a restart, survives one, and
// stops when removed; an http_pull consumer's policy on a config-declared queue survives a restart.
const scratch = devScratchAfterEach();

const config = `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"

[[queues.producers]]
binding = "JOBS"
queue = "jobs"

[[queues.producers]]
binding = "PULLED"
queue = "pulled"

[[queues.producers]]
binding = "PULLED_DLQ"
queue = "pulled-dlq"
`;

const worker = `export default {
  async fetch(request, env) {
    await env.JOBS.send(new URL(request.url).searchParams.get("m"), { contentType: "text" });
    return new Response("sent", { status: 202 });
  },
  async queue(batch) {
    for (const message of batch.messages) console.log("consumed " + batch.queue + ": " + message.body);
  },
};
`;

interface Dev {
  run: Run;
  workerUrl: string;
  api: string;
}

async function startDev(p: Project): Promise<Dev> {
  const dev = scratch.run(["dev", "--port", "0", "--api-port", "0"], p.dir);
  const [, workerUrl] = await waitFor(dev, /Worker "app" listening on (http:\/\/\S+)/, 90_000);
  const [, api] = await waitFor(dev, /queues API listening on (http:\/\/\S+)\/v1/, 90_000);
  return { run: dev, workerUrl: workerUrl!.replace(/\/$/, ""), api: api! };
}

async function stopDev(dev: Dev): Promise<void> {
  dev.run.kill("SIGTERM");
  expect(await dev.run.exited).toBe(0);
  scratch.forget(dev.run);
}

async function send(dev: Dev, body: string): Promise<void> {
  const sent = await request(`${dev.workerUrl}/send?m=${body}`, { method: "POST" });
  expect(sent.statusCode).toBe(202);
  await sent.body.text();
}

async function nativeQueue(dev: Dev, key: string, queue: string): Promise<Record<string, unknown>> {
  const answer = await request(`${dev.api}/v1/orgs/local/projects/local/envs/dev/queues/${queue}`, { headers: { authorization: `Bearer ${key}` } });
  expect(answer.statusCode).toBe(200);
  return (await answer.body.json()) as Record<string, unknown>;
}

test("consumers added with wrangler and the SDK run at once, survive a restart, and stop when removed", async () => {
  const p = scratch.project();
  p.write({ "wrangler.toml": config, "worker.js": worker });
  const key = execFileSync(
    process.execPath,
    [celld, "keys", "create", "--data", `${p.dir}/.celld`, "--org", "local", "--project", "local", "--env", "dev", "--scope", "events:publish", "--scope", "events:write", "--scope", "events:read"],
    { cwd: p.dir, encoding: "utf8" },
  ).match(/^ck_\S+$/m)![0];

  let dev = await startDev(p);
  let wrangler = wranglerAgainst(dev.api, key, "local");
  const added = await wrangler(["queues", "consumer", "add", "jobs", "app", "--batch-timeout", "0"]);
  expect(added.stdout).toContain("Added consumer to queue jobs");
  // No restart: the running Worker takes the batch.
  await send(dev, "one");
  await waitFor(dev.run, /consumed jobs: one/, 30_000);
  expect(dev.run.output()).toMatch(/queue "jobs" -> consumer "app" \(added through the API\)/);

  // An http_pull consumer on a queue the config declares with no consumer: its policy is the API's.
  const pull = await wrangler(["queues", "consumer", "http", "add", "pulled", "--message-retries", "1", "--dead-letter-queue", "pulled-dlq"]);
  expect(pull.code).toBe(0);
  const policy = { max_deliveries: 2, dead_letter_queue: "orgs/local/projects/local/envs/dev/queues/pulled-dlq" };
  expect(await nativeQueue(dev, key, "pulled")).toMatchObject(policy);

  await stopDev(dev);
  dev = await startDev(p);
  wrangler = wranglerAgainst(dev.api, key, "local");
  // Both survive the restart: the policy is not put back to the config's, the Worker consumer runs.
  expect(await nativeQueue(dev, key, "pulled")).toMatchObject(policy);
  await send(dev, "two");
  await waitFor(dev.run, /consumed jobs: two/, 30_000);

  // The SDK: a change of settings restarts the consumer with them; a Worker that does not run is refused.
  const cf = new Cloudflare({ apiToken: key, baseURL: `${dev.api}/client/v4`, maxRetries: 0 });
  const account_id = "local";
  const jobs = (await cf.queues.list({ account_id })).result.find((q) => q.queue_name === "jobs")!;
  const consumer = jobs.consumers![0]!;
  expect(consumer).toMatchObject({ type: "worker", script: "app" });
  const updated = await cf.queues.consumers.update(consumer.consumer_id!, {
    account_id,
    queue_id: jobs.queue_id!,
    type: "worker",
    script_name: "app",
    settings: { batch_size: 2, max_wait_time_ms: 0 },
  });
  expect(updated.settings).toMatchObject({ batch_size: 2 });
  await send(dev, "three");
  await waitFor(dev.run, /consumed jobs: three/, 30_000);
  const ghost = await cf.queues.consumers
    .create(jobs.queue_id!, { account_id, type: "worker", script_name: "ghost" })
    .then(() => undefined, (error: unknown) => error as { status?: number; errors?: Array<{ code: number; message: string }> });
  expect(ghost?.status).toBe(404);
  expect(ghost?.errors?.[0]).toMatchObject({ code: 10007, message: expect.stringContaining("ghost") });

  // Removed: it runs no more, so a message sent after stays in the queue for a pull.
  const removed = await wrangler(["queues", "consumer", "remove", "jobs", "app"]);
  expect(removed.code).toBe(0);
  await send(dev, "four");
  const pulled = await cf.queues.messages.pull(jobs.queue_id!, { account_id, batch_size: 10 });
  expect(pulled.messages?.map((m) => m.body)).toEqual(["four"]);
  expect(pulled.messages?.[0]).toMatchObject({ attempts: 1 });
  expect(dev.run.output()).not.toMatch(/consumed jobs: four/);
}, 420_000);
