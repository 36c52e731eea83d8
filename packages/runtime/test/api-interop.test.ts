/**
 * The API and Workers meet in the same cells. A real Worker in real workerd (Miniflare, with the
 * host's queue wiring and the bindings' consumer dispatcher) sends with env.JOBS.send() and
 * consumes with queue(); the API leases what the Worker sent and sends what the Worker consumes.
 */
import { Miniflare } from "miniflare";
import { describe, expect, it, onTestFinished } from "vitest";
import { ConsumerDispatcher, nodeProducerHandler, toConsumerMessage } from "@celld/bindings";
import { defaultWorkerEnv, workerMessageEventType } from "../src/api/index.ts";
import { queueProducerWorkerOptions } from "../src/queue-transport/miniflare-queue-wiring.ts";
import { ProducerServer } from "../src/queue-transport/producer-server.ts";
import { apiHarness, eventually } from "./api-harness.ts";

const script = /* js */ `
const seen = [];
function describe(body) {
  if (body instanceof ArrayBuffer) return { kind: "ArrayBuffer", value: [...new Uint8Array(body)] };
  if (body !== null && typeof body === "object" && body.when instanceof Date) {
    return { kind: "v8", value: { when: body.when.toISOString(), map: [...body.map] } };
  }
  return { kind: typeof body, value: body };
}
export default {
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (pathname === "/send") {
      await env.JOBS.send({ hello: "json" }, { contentType: "json" });
      await env.JOBS.send("plain text", { contentType: "text" });
      await env.JOBS.send(new Uint8Array([1, 2, 3]), { contentType: "bytes" });
      await env.JOBS.send({ when: new Date(0), map: new Map([["k", 1]]) }, { contentType: "v8" });
      return new Response("sent");
    }
    return Response.json(seen);
  },
  async queue(batch) {
    for (const message of batch.messages) {
      seen.push({ queue: batch.queue, id: message.id, attempts: message.attempts, ...describe(message.body) });
      message.ack();
    }
  },
};
`;

type Leased = { id: string; lease_generation: number; delivery_count: number; event: Record<string, unknown> };

async function setup() {
  const h = await apiHarness({ workerQueues: { declared: () => ["jobs", "replayed"] } });
  const key = h.key(undefined, defaultWorkerEnv);
  const server = await ProducerServer.start();
  const wiring = queueProducerWorkerOptions(
    [{ binding: "JOBS", queue: "jobs" }],
    (producer) => nodeProducerHandler({ queue: producer.queue, getCell: () => h.registry.open(producer.queue) }),
    server,
  );
  const mf = new Miniflare({
    cf: false,
    workers: [{ name: "app", modules: true, compatibilityDate: "2026-04-26", script, ...wiring }],
  });
  const dispatchers: ConsumerDispatcher[] = [];
  onTestFinished(async () => {
    for (const d of dispatchers) await d.stop();
    await mf.dispose();
    await server.close();
  });
  const consume = async (queue: string) => {
    const dispatcher = new ConsumerDispatcher({
      cell: await h.registry.open(queue),
      clock: h.clock,
      // Node's Fetcher.queue (Miniflare's proxy): this test is about the cells, not the host's delivery.
      invoke: async (name, messages, metadata) =>
        (await mf.getWorker("app")).queue(name, messages.map(toConsumerMessage) as never, metadata as never),
      settings: { queue, maxBatchSize: 10, maxBatchTimeoutSeconds: 0, maxConcurrency: 1, retryDelaySeconds: 0, wallTimeSeconds: 60 },
      log: { info: () => {}, warn: () => {}, error: () => {} },
    });
    dispatchers.push(dispatcher);
    dispatcher.start();
  };
  const seen = async (): Promise<Array<Record<string, unknown>>> => (await mf.dispatchFetch("http://app/seen")).json() as never;
  const path = (queue: string) => `/v1/${defaultWorkerEnv}/queues/${queue}`;
  return { h, key, mf, consume, seen, path };
}

describe("Worker → API", () => {
  it("messages a Worker sent are leased over the API as CloudEvents, by content type", async () => {
    const { h, key, mf, path } = await setup();
    expect(await (await mf.dispatchFetch("http://app/send")).text()).toBe("sent");

    const queue = await h.call("GET", path("jobs"), { key });
    expect(queue.json).toMatchObject({ origin: "workers", counts: { ready: 4 } });
    const res = await h.call("POST", `${path("jobs")}:lease`, { key, body: { max_messages: 10 } });
    const messages = res.json.messages as Leased[];
    const source = `/${defaultWorkerEnv}/queues/jobs`;
    const attributes = (m: Leased, datacontenttype: string) => ({
      specversion: "1.0",
      id: m.id,
      source,
      type: workerMessageEventType,
      datacontenttype,
      time: "2026-01-01T00:00:00.000Z",
    });
    const [json, text, bytes, v8] = messages;
    expect(json!.event).toEqual({ ...attributes(json!, "application/json"), data: { hello: "json" } });
    expect(text!.event).toEqual({ ...attributes(text!, "text/plain"), data: "plain text" });
    expect(bytes!.event).toEqual({ ...attributes(bytes!, "application/octet-stream"), data_base64: "AQID" });
    expect(v8!.event).toMatchObject(attributes(v8!, "application/x-v8"));
    // workerd's structured-clone bytes, untouched: version header 0xFF 0x0F first.
    const v8Bytes = Buffer.from(v8!.event["data_base64"] as string, "base64");
    expect([...v8Bytes.subarray(0, 2)]).toEqual([0xff, 0x0f]);

    const acked = await h.call("POST", `${path("jobs")}:ack`, {
      key,
      body: { messages: messages.map((m) => ({ id: m.id, lease_generation: m.lease_generation })) },
    });
    expect(acked.json.acked).toBe(4);
  });

  it("a Workers queue's settings belong to the Workers config: the API reads them and refuses changes", async () => {
    const { h, key, path } = await setup();
    const list = await h.call("GET", `/v1/${defaultWorkerEnv}/queues`, { key });
    expect(list.json.queues.map((q: { name: string; origin: string }) => [q.name.split("/").pop(), q.origin])).toEqual([
      ["jobs", "workers"],
      ["replayed", "workers"],
    ]);
    const patch = await h.call("PATCH", path("jobs"), { key, body: { max_deliveries: 2 } });
    expect(patch.status).toBe(409);
    expect(patch.json.error.code).toBe("failed_precondition");
    expect((await h.call("DELETE", path("jobs"), { key })).status).toBe(409);
    expect((await h.call("POST", `/v1/${defaultWorkerEnv}/queues`, { key, body: { name: "jobs" } })).status).toBe(409);
  });
});

describe("API → Worker", () => {
  it("events sent over the API reach the Worker's queue() as their decoded data, with the same ids", async () => {
    const { h, key, consume, seen, path } = await setup();
    const sent = await h.call("POST", `${path("jobs")}:send`, {
      key,
      body: {
        events: [
          { specversion: "1.0", id: "e1", source: "/api", type: "t", data: { order: 7, items: ["a"] } },
          { specversion: "1.0", id: "e2", source: "/api", type: "t", datacontenttype: "text/plain", data: "hello worker" },
          { specversion: "1.0", id: "e3", source: "/api", type: "t", datacontenttype: "application/octet-stream", data_base64: "CQgH" },
        ],
      },
    });
    expect(sent.status).toBe(200);
    await consume("jobs");
    await eventually(async () => (await seen()).length === 3);
    const [ids] = [sent.json.message_ids as string[]];
    expect(await seen()).toEqual([
      { queue: "jobs", id: ids[0], attempts: 1, kind: "object", value: { order: 7, items: ["a"] } },
      { queue: "jobs", id: ids[1], attempts: 1, kind: "string", value: "hello worker" },
      { queue: "jobs", id: ids[2], attempts: 1, kind: "ArrayBuffer", value: [9, 8, 7] },
    ]);
    await eventually(async () => (await h.call("GET", path("jobs"), { key })).json.counts.leased === 0);
    expect((await h.call("GET", path("jobs"), { key })).json.counts).toMatchObject({ ready: 0, leased: 0 });
  });

  it("a Worker's v8 message leased over the API and sent back keeps its structured clone for the next Worker", async () => {
    const { h, key, mf, consume, seen, path } = await setup();
    await mf.dispatchFetch("http://app/send");
    const leased = (await h.call("POST", `${path("jobs")}:lease`, { key, body: { max_messages: 10 } })).json.messages as Leased[];
    const v8 = leased.find((m) => m.event["datacontenttype"] === "application/x-v8")!;
    const resent = await h.call("POST", `${path("replayed")}:send`, { key, body: { events: [v8.event] } });
    expect(resent.status).toBe(200);
    await consume("replayed");
    await eventually(async () => (await seen()).length === 1);
    expect((await seen())[0]).toMatchObject({ queue: "replayed", kind: "v8", value: { when: "1970-01-01T00:00:00.000Z", map: [["k", 1]] } });
  });
});
