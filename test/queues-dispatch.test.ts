/**
 * The queue dispatch Worker through the host: a batch crosses from Node to the consumer's queue()
 * handler as one frame, its messages in order and their bytes untouched; a frame the Worker cannot
 * run comes back to Node as an error.
 */
import { createHash } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { dispatchKeyBinding, dispatchKeyHeader, encodeBatch } from "@celld/bindings";
import { limits } from "@celld/queue-cell";
import { Agent, request } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import { QueueDispatchClient } from "../packages/runtime/src/queue-transport/queue-dispatch-client.ts";
import { consumerBindings, queueDispatchSocketName, queueDispatchWorkerName } from "../packages/runtime/src/queue-transport/queue-dispatch-worker.ts";
import { eventually, project, runHost, type RunningHost } from "./host-harness.ts";

// Reports what queue() was given, per batch: a SHA-256 of each body stands in for its bytes.
const worker = /* js */ `
const batches = [];
const hex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
export default {
  async fetch() {
    return Response.json(batches);
  },
  async queue(batch) {
    const messages = [];
    for (const m of batch.messages) {
      messages.push({
        id: m.id,
        attempts: m.attempts,
        kind: m.body instanceof ArrayBuffer ? "ArrayBuffer" : typeof m.body,
        length: m.body.byteLength,
        sha256: hex(await crypto.subtle.digest("SHA-256", m.body)),
      });
    }
    batches.push({ queue: batch.queue, messages });
  },
};
`;

interface SeenBatch {
  queue: string;
  messages: Array<{ id: string; attempts: number; kind: string; length: number; sha256: string }>;
}

const p = project();
let h: RunningHost;

beforeAll(async () => {
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.consumers = [{ queue = "raw", max_batch_size = 5, max_batch_timeout = 0 }]
`,
    "worker.js": worker,
  });
  h = await runHost([config], p.dataDir);
});

afterAll(async () => {
  await h?.close();
  // workerd leaves its socket file when it exits; the host removes it.
  expect(existsSync(join(p.dataDir, "run", queueDispatchSocketName))).toBe(false);
  p.remove();
});

test("a batch of bytes messages arrives in order, each body exactly its bytes", async () => {
  const bodies = [
    new Uint8Array(0),
    new Uint8Array([0xff]),
    Uint8Array.from({ length: 256 }, (_, i) => i),
    Uint8Array.from({ length: limits.messageBytesMax }, (_, i) => (i * 31 + 7) & 0xff),
    new Uint8Array([0, 0, 0]),
  ];
  const cell = await h.cell("raw");
  // One send: the five are ready together and make one full batch.
  const { ids } = await cell.send(bodies.map((body) => ({ body, contentType: "bytes" })));
  const [batch] = await eventually(async () => {
    const seen = (await (await h.fetch("/")).json()) as SeenBatch[];
    return seen.length > 0 ? seen : undefined;
  }, "the batch to reach queue()");
  expect(batch!.queue).toBe("raw");
  expect(batch!.messages).toEqual(
    bodies.map((body, i) => ({
      id: ids[i],
      attempts: 1,
      kind: "ArrayBuffer",
      length: body.byteLength,
      sha256: createHash("sha256").update(body).digest("hex"),
    })),
  );
  await eventually(async () => ((await cell.counts()).leased === 0 ? true : undefined), "the batch to be acked");
  expect(await cell.counts()).toMatchObject({ ready: 0, leased: 0, delayed: 0 });
});

test("the dispatch Worker listens on a Unix socket in <data>/run, which only this user can enter", () => {
  const socketPath = join(p.dataDir, "run", queueDispatchSocketName);
  expect(statSync(socketPath).isSocket()).toBe(true);
  expect(statSync(join(p.dataDir, "run")).mode & 0o777).toBe(0o700);
});

test("a frame the Worker cannot run is refused, and the client throws what it said", async () => {
  const socketPath = join(p.dataDir, "run", queueDispatchSocketName);
  const key = await dispatchKey();
  const headers = { [dispatchKeyHeader]: key };
  const agent = new Agent({ connect: { socketPath } });
  try {
    const url = "http://localhost/";
    const get = await request(url, { headers, dispatcher: agent });
    await get.body.dump();
    expect(get.statusCode).toBe(405);
    const garbage = await request(url, { method: "POST", headers, body: new Uint8Array([0, 0, 0, 9, 1]), dispatcher: agent });
    expect(garbage.statusCode).toBe(400);
    expect(await garbage.body.text()).toMatch(/^batch frame: the header length says 9 bytes but 1 follow/);
  } finally {
    await agent.close();
  }

  const client = new QueueDispatchClient({ socketPath }, key);
  try {
    const message = { id: "m", sentAt: 1, deliveries: 1, contentType: "bytes", body: new Uint8Array([104]) };
    const metadata = { metrics: { backlogCount: 0, backlogBytes: 0 } };
    await expect(client.invoker("toString")("raw", [message], metadata)).rejects.toThrow(
      /the queue dispatch Worker answered 400: no consumer Worker is bound as "toString"/,
    );
    // The binding the host gave "app": the handler runs and its result comes back.
    const app = consumerBindings(["app"]).get("app")!;
    await expect(client.invoker(app)("raw", [message], metadata)).resolves.toMatchObject({ outcome: "ok" });
  } finally {
    await client.close();
  }
});

test("Miniflare's entry socket, open to every local process, cannot run a batch through the dispatch Worker", async () => {
  // The entry socket routes a request to any Worker named in MF-Route-Override, the dispatch
  // Worker included; it listens on loopback TCP, which every local user can reach.
  const entry = await h.host.miniflare.ready;
  const message = { id: "forged", sentAt: 1, deliveries: 1, contentType: "bytes", body: new Uint8Array([104]) };
  const frame = encodeBatch({
    binding: consumerBindings(["app"]).get("app")!,
    queue: "raw",
    metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } },
    messages: [message],
  });
  const before = ((await (await h.fetch("/")).json()) as SeenBatch[]).length;
  const forged = await request(new URL("/", entry), {
    method: "POST",
    headers: { "MF-Route-Override": queueDispatchWorkerName },
    body: frame,
  });
  const text = await forged.body.text();
  expect(forged.statusCode, text).toBe(403);
  // A wrong key is refused alike, on the host's own socket too.
  const agent = new Agent({ connect: { socketPath: join(p.dataDir, "run", queueDispatchSocketName) } });
  try {
    const wrong = await request("http://localhost/", {
      method: "POST",
      headers: { [dispatchKeyHeader]: "0".repeat((await dispatchKey()).length) },
      body: frame,
      dispatcher: agent,
    });
    await wrong.body.dump();
    expect(wrong.statusCode).toBe(403);
  } finally {
    await agent.close();
  }
  const seen = (await (await h.fetch("/")).json()) as SeenBatch[];
  expect(seen.length).toBe(before);
});

/** The key the host gave the dispatch Worker, read back through Miniflare as only its owner can. */
async function dispatchKey(): Promise<string> {
  const bindings = await h.host.miniflare.getBindings<Record<string, string>>(queueDispatchWorkerName);
  return bindings[dispatchKeyBinding]!;
}
