import { execFileSync } from "node:child_process";
import { deserialize } from "node:v8";
import Cloudflare from "cloudflare";
import { request } from "undici";
import { expect, test } from "vitest";
import { celld, waitFor } from "./cli-harness.ts";
import { devScratchAfterEach } from "./dev-cli.ts";
import type { Project } from "./host-harness.ts";

// Issue #31's "done when": `celld dev --api-port` with a config holding a Worker producer, a push
// consumer and an http_pull consumer, driven by the real `cloudflare` SDK.
const scratch = devScratchAfterEach();

function pullProject(): Project {
  const p = scratch.project();
  p.write({
    "wrangler.toml": `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"

[[queues.producers]]
binding = "PULLED"
queue = "pulled"

[[queues.producers]]
binding = "PUSHED"
queue = "pushed"

[[queues.consumers]]
queue = "pushed"
max_batch_timeout = 0

[[queues.consumers]]
queue = "pulled"
type = "http_pull"
visibility_timeout_ms = 60000
max_retries = 2
`,
    "worker.js": `export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/push") {
      await env.PUSHED.send("pushed body", { contentType: "text" });
      return new Response("pushed", { status: 202 });
    }
    await env.PULLED.send("plain text", { contentType: "text" });
    await env.PULLED.send({ kind: "json", n: 1 }, { contentType: "json" });
    await env.PULLED.send(new Uint8Array([1, 2, 3]), { contentType: "bytes" });
    await env.PULLED.send({ kind: "v8", when: new Date(0) }, { contentType: "v8" });
    return new Response("sent", { status: 202 });
  },
  async queue(batch) {
    for (const message of batch.messages) console.log("consumed " + batch.queue + ": " + message.body);
  },
};
`,
  });
  return p;
}

// And with the cells on worker threads (--cell-threads 2): "pulled" and "pushed" on threads of their own.
test.each([
  ["", []],
  [", cells on 2 threads", ["--cell-threads", "2"]],
])("a Worker's sends to an http_pull queue are pulled and acked through the SDK; its push consumer still runs%s", async (_what, threadArgs) => {
  const p = pullProject();
  const key = execFileSync(
    process.execPath,
    [celld, "keys", "create", "--data", `${p.dir}/.celld`, "--org", "local", "--project", "local", "--env", "dev", "--scope", "events:publish", "--scope", "events:write", "--scope", "events:read"],
    { cwd: p.dir, encoding: "utf8" },
  ).match(/^ck_\S+$/m)?.[0];
  expect(key).toBeDefined();
  const dev = scratch.run(["dev", "--port", "0", "--api-port", "0", ...threadArgs], p.dir);
  const [, workerUrl] = await waitFor(dev, /Worker "app" listening on (http:\/\/\S+)/, 60_000);
  const [, api] = await waitFor(dev, /queues API listening on (http:\/\/\S+)\/v1/, 60_000);

  const sent = await request(`${workerUrl!.replace(/\/$/, "")}/send`, { method: "POST" });
  expect(sent.statusCode).toBe(202);
  await sent.body.text();
  const pushed = await request(`${workerUrl!.replace(/\/$/, "")}/push`, { method: "POST" });
  expect(pushed.statusCode).toBe(202);
  await pushed.body.text();
  await waitFor(dev, /consumed pushed: pushed body/, 30_000);

  const cf = new Cloudflare({ apiToken: key!, baseURL: `${api}/client/v4`, maxRetries: 0 });
  const account_id = "local";
  const queues = await cf.queues.list({ account_id });
  const pulledQueue = queues.result.find((q) => q.queue_name === "pulled");
  expect(pulledQueue?.consumers?.[0]).toMatchObject({ type: "http_pull" });
  const queueId = pulledQueue!.queue_id!;

  const pulled = await cf.queues.messages.pull(queueId, { account_id, batch_size: 10, visibility_timeout_ms: 30_000 });
  const messages = pulled.messages!;
  expect(messages).toHaveLength(4);
  const byType = (type: string) => messages.find((m) => (m.metadata as Record<string, string>)["CF-Content-Type"] === type)!;
  expect(byType("text").body).toBe("plain text");
  expect(JSON.parse(Buffer.from(byType("json").body!, "base64").toString())).toEqual({ kind: "json", n: 1 });
  expect([...Buffer.from(byType("bytes").body!, "base64")]).toEqual([1, 2, 3]);
  // v8 bodies reach a pull consumer as the structured-clone bytes workerd wrote, in base64.
  expect(deserialize(Buffer.from(byType("v8").body!, "base64"))).toEqual({ kind: "v8", when: new Date(0) });
  for (const m of messages) expect(m).toMatchObject({ attempts: 1, lease_id: expect.any(String) });

  const acked = await cf.queues.messages.ack(queueId, { account_id, acks: messages.map((m) => ({ lease_id: m.lease_id! })) });
  expect(acked).toMatchObject({ ackCount: 4, retryCount: 0 });
  const again = await cf.queues.messages.pull(queueId, { account_id, batch_size: 10 });
  expect(again.messages).toEqual([]);
  // The push consumer never saw the pulled queue's messages.
  expect(dev.output()).not.toMatch(/consumed pulled/);
}, 180_000);
