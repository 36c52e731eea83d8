import { request } from "undici";
import { afterEach, expect, test } from "vitest";
import { promtoolCheck, sample } from "../packages/runtime/test/metrics-harness.ts";
import { run, waitFor, type Run } from "./cli-harness.ts";
import { project, type Project } from "./host-harness.ts";

const projects: Project[] = [];
afterEach(() => projects.splice(0).forEach((p) => p.remove()));

/** A Worker that sends `n` messages on GET /send?n=, and a consumer of them that acks every batch. */
function queueProject(): Project {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"

[[queues.producers]]
binding = "JOBS"
queue = "jobs"

[[queues.consumers]]
queue = "jobs"
max_batch_size = 5
max_batch_timeout = 1
max_concurrency = 3
`,
    "worker.js": `export default {
  async fetch(request, env) {
    const n = Number(new URL(request.url).searchParams.get("n"));
    await env.JOBS.sendBatch(Array.from({ length: n }, (_, i) => ({ body: { i } })));
    console.log("sent " + n);
    return new Response("sent", { status: 202 });
  },
  async queue(batch) {},
};
`,
  });
  return p;
}

async function scrape(url: string): Promise<string> {
  const res = await request(`${url}/metrics`);
  expect(res.statusCode).toBe(200);
  return res.body.text();
}

async function stop(dev: Run): Promise<void> {
  dev.kill("SIGTERM");
  expect(await dev.exited).toBe(0);
}

test("celld dev --log-format json --log-requests --metrics-public: JSON lines, batch and request lines, exact counters", async () => {
  const p = queueProject();
  const dev = run(["dev", "--port", "0", "--api-port", "0", "--log-requests", "--log-format", "json", "--metrics-public"], p.dir);
  const [, workerUrl] = await waitFor(dev, /"message":"Worker \\"app\\" listening on (http:\/\/[^"\s]+)/);
  const [, api] = await waitFor(dev, /"message":"queues API listening on (http:\/\/\S+)\/v1/);
  try {
    const sent = await request(`${workerUrl}send?n=12`);
    expect(sent.statusCode).toBe(202);
    await sent.body.text();
    const q = { environment: "orgs/local/projects/local/envs/dev", queue: "jobs" };
    await expect.poll(async () => sample(await scrape(api!), "celld_queue_messages_acked_total", q), { timeout: 30_000 }).toBe(12);
    const unauthorized = await request(`${api}/v1/key`);
    expect(unauthorized.statusCode).toBe(401);
    await unauthorized.body.text();
    const text = await scrape(api!);
    expect(promtoolCheck(text)).toEqual({ status: 0, output: "" });
    const batches = dev
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{") && line.includes('"message":"QUEUE jobs '))
      .map((line) => JSON.parse(line) as { acked: number; size: number; queue: string; duration_ms: number; level: string });
    expect(batches.reduce((n, b) => n + b.acked, 0)).toBe(12);
    expect(batches.every((b) => b.queue === "jobs" && b.level === "info" && b.size <= 5 && b.duration_ms >= 0)).toBe(true);
    expect({
      sent: sample(text, "celld_queue_messages_sent_total", q),
      delivered: sample(text, "celld_queue_messages_delivered_total", q),
      retried: sample(text, "celld_queue_messages_retried_total", q),
      batches: sample(text, "celld_queue_batches_total", { ...q, outcome: "ok" }),
      handlerCount: sample(text, "celld_queue_batch_handler_seconds_count", q),
      ackAges: sample(text, "celld_queue_ack_age_seconds_count", q),
      sendCommits: sample(text, "celld_queue_send_commit_seconds_count", q),
      concurrencyMax: sample(text, "celld_queue_consumer_concurrency_max", q),
      backlog: sample(text, "celld_queue_backlog_messages", q),
    }).toEqual({
      sent: 12,
      delivered: 12,
      retried: 0,
      batches: batches.length,
      handlerCount: batches.length,
      ackAges: 12,
      sendCommits: 1,
      concurrencyMax: 3,
      backlog: 0,
    });
    await waitFor(dev, /"message":"GET \/v1\/key 401 Unauthorized \(\d+ms\)"/);
  } finally {
    await stop(dev);
  }
  // Every line, celld's and the Worker's own console output, is one JSON object.
  const lines = dev.output().split("\n").filter((line) => line !== "");
  for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
  const objects = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(objects.every((o) => typeof o["level"] === "string" && typeof o["time"] === "string" && typeof o["message"] === "string")).toBe(true);
  expect(objects).toContainEqual(expect.objectContaining({ level: "info", message: "sent 12", source: "worker" }));
  expect(objects).toContainEqual(expect.objectContaining({ method: "GET", url: "/v1/key", status: 401, port: "api" }));
});

test("celld dev --log-requests prints QUEUE lines as text; /metrics without --metrics-public asks for a key", async () => {
  const p = queueProject();
  const dev = run(["dev", "--port", "0", "--api-port", "0", "--log-requests"], p.dir);
  const [, workerUrl] = await waitFor(dev, /Worker "app" listening on (http:\/\/\S+)/);
  const [, api] = await waitFor(dev, /queues API listening on (http:\/\/\S+)\/v1/);
  try {
    await waitFor(dev, /\[celld\] dashboard at http:\/\/\S+\/; metrics at http:\/\/\S+\/metrics \(a key with metrics:read\)/);
    const sent = await request(`${workerUrl}send?n=3`);
    await sent.body.text();
    await waitFor(dev, /\[celld\] QUEUE jobs 3\/3 \(\d+ms\)\n/);
    const res = await request(`${api}/metrics`);
    expect(res.statusCode).toBe(401);
    await res.body.text();
    await waitFor(dev, /\[celld\] GET \/metrics 401 Unauthorized \(\d+ms\)\n/);
  } finally {
    await stop(dev);
  }
});
