import { describe, expect, it } from "vitest";
import { QueuesApiError, QueuesClient, type WireFormat } from "../src/client/index.ts";
import { apiHarness, testEnv } from "./api-harness.ts";

async function clientHarness(format: WireFormat) {
  const h = await apiHarness();
  const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv, format });
  return { h, client };
}

for (const format of ["protobuf", "json"] as const) {
  describe(`the client over ${format}`, () => {
    it("sends every kind of data and leases it back the same", async () => {
      const { h, client } = await clientHarness(format);
      await client.createQueue("jobs");
      const events = [
        { id: "json", source: "/c", type: "t", data: { nested: [1, { two: 2 }], s: "é" } },
        { id: "string-json", source: "/c", type: "t", data: "a JSON string" },
        { id: "text", source: "/c", type: "t", datacontenttype: "text/csv", data: "a,b\n1,2" },
        { id: "bytes", source: "/c", type: "t", data: new Uint8Array([0, 255, 7]) },
        { id: "none", source: "/c", type: "t", subject: "s", time: "2026-01-01T00:00:00.5Z", retries: 2, sampled: false },
      ];
      const { messageIds } = await client.send("jobs", events);
      expect(messageIds).toHaveLength(5);
      const leased = await client.lease("jobs", { maxMessages: 10 });
      expect(leased.map((m) => m.id)).toEqual(messageIds);
      const byId = Object.fromEntries(leased.map((m) => [m.event.id, m]));
      expect(byId["json"]!.event.data).toEqual(events[0]!.data);
      expect(byId["string-json"]!.event.data).toBe("a JSON string");
      expect(byId["text"]!.event).toMatchObject({ datacontenttype: "text/csv", data: "a,b\n1,2" });
      expect([...(byId["bytes"]!.event.data as Uint8Array)]).toEqual([0, 255, 7]);
      expect(byId["none"]!.event).toEqual({ specversion: "1.0", id: "none", source: "/c", type: "t", subject: "s", time: "2026-01-01T00:00:00.500Z", retries: 2, sampled: false });
      const first = leased[0]!;
      expect(first).toMatchObject({ leaseGeneration: 1, deliveryCount: 1 });
      expect(first.leaseExpireTime.toISOString()).toBe("2026-01-01T00:00:30.000Z");
      expect(first.sendTime.toISOString()).toBe("2026-01-01T00:00:00.000Z");
      expect(await client.ack("jobs", leased)).toEqual({ acked: 5, retried: 0, deadLettered: 0, staleLeases: [] });
      await client.close();
      void h;
    });

    it("parseJsonData reads JSON data from the text the server holds: big integers survive", async () => {
      const { h, client: parsing } = await clientHarness(format);
      await parsing.createQueue("jobs", { maxDeliveries: 1 });
      const data = '{"big":12345678901234567891,"f":1.0,"s":"\\u00e9"}';
      const raw = `{"events":[{"specversion":"1.0","id":"big","source":"/c","type":"t","data":${data}},{"specversion":"1.0","id":"text","source":"/c","type":"t","datacontenttype":"text/plain","data":"12345678901234567891"},{"specversion":"1.0","id":"bytes","source":"/c","type":"t","data_base64":"AP8="}]}`;
      expect((await h.call("POST", `${h.queuePath("jobs")}:send`, { raw, headers: { "content-type": "application/json" } })).status).toBe(200);
      const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv, format, parseJsonData: (text) => text });
      const leased = await client.lease("jobs", { maxMessages: 10 });
      expect(leased.map((m) => m.event.data)).toEqual([data, "12345678901234567891", new Uint8Array([0, 255])]);
      // The default still parses: the same data, rounded as JSON.parse rounds it.
      await client.nack("jobs", leased);
      const dead = await client.listDeadLetters("jobs");
      expect(dead.deadLetters.map((d) => d.event.data)).toEqual([data, "12345678901234567891", new Uint8Array([0, 255])]);
      expect((await parsing.listDeadLetters("jobs")).deadLetters[0]!.event.data).toEqual({ big: 12345678901234567891, f: 1, s: "é" });
      await client.close();
      await parsing.close();
    });

    it("an attribute given as null is unset, as CloudEvents' JSON format reads it", async () => {
      const { client } = await clientHarness(format);
      await client.createQueue("jobs");
      await client.send("jobs", [{ id: "n", source: "/c", type: "t", subject: null, traceparent: null, data: 1 }]);
      const [leased] = await client.lease("jobs");
      expect(leased!.event).not.toHaveProperty("subject");
      expect(leased!.event).not.toHaveProperty("traceparent");
      expect(leased!.event.data).toBe(1);
      await client.close();
    });

    it("ack and nack report stale leases; nack delays", async () => {
      const { h, client } = await clientHarness(format);
      await client.createQueue("jobs");
      await client.send("jobs", [{ id: "a", source: "/c", type: "t", data: 1 }], { delay: 0 });
      const [old] = await client.lease("jobs", { visibilityTimeout: 5 });
      h.clock.advance(5_000);
      const [current] = await client.lease("jobs", { visibilityTimeout: 60 });
      expect(current!.leaseGeneration).toBe(old!.leaseGeneration + 1);
      expect(await client.ack("jobs", [old!])).toEqual({ acked: 0, retried: 0, deadLettered: 0, staleLeases: [{ id: old!.id, leaseGeneration: old!.leaseGeneration }] });
      expect((await client.nack("jobs", [current!], { delay: 30 })).retried).toBe(1);
      expect(await client.lease("jobs")).toEqual([]);
      h.clock.advance(30_000);
      const [again] = await client.lease("jobs");
      expect(again!.deliveryCount).toBe(3);
      expect((await client.nack("jobs", [{ ...again!, delay: 1 }])).retried).toBe(1);
      await client.close();
    });

    it("a long poll wakes on a send, and an aborted poll hands its messages back", async () => {
      const { h, client } = await clientHarness(format);
      await client.createQueue("jobs");
      const polling = await h.whenWaiting(() => client.lease("jobs", { wait: 20 }));
      await client.send("jobs", [{ id: "wake", source: "/c", type: "t" }]);
      expect((await polling.result).map((m) => m.event.id)).toEqual(["wake"]);

      const controller = new AbortController();
      const aborted = await h.whenWaiting(() => client.lease("jobs", { wait: 20, signal: controller.signal }));
      controller.abort();
      await expect(aborted.result).rejects.toThrow();
      await client.send("jobs", [{ id: "after", source: "/c", type: "t" }]);
      const [after] = await client.lease("jobs", { wait: 20 });
      expect(after!.event.id).toBe("after");
      expect(after!.deliveryCount).toBe(1);
      await client.close();
    });

    it("administers queues, dead letters and subscriptions", async () => {
      const { h, client } = await clientHarness(format);
      await client.createQueue("dlq");
      const created = await client.createQueue("jobs", { visibilityTimeout: 10, maxDeliveries: 1, deliveryDelay: 0 });
      expect(created).toMatchObject({ name: `${testEnv}/queues/jobs`, visibilityTimeout: 10, maxDeliveries: 1, deadLetterQueue: null, origin: "api" });
      expect(created.counts).toMatchObject({ ready: 0, oldestMessageTime: null });
      const updated = await client.updateQueue(`${testEnv}/queues/jobs`, { visibilityTimeout: 20 });
      expect(updated.visibilityTimeout).toBe(20);
      const page = await client.listQueues({ pageSize: 1 });
      expect(page.queues.map((q) => q.name.split("/").pop())).toEqual(["dlq"]);
      expect((await client.listQueues({ pageToken: page.nextPageToken! })).queues.map((q) => q.name.split("/").pop())).toEqual(["jobs"]);

      await client.send("jobs", [{ id: "a", source: "/c", type: "t", data: { x: 1 } }]);
      const [m] = await client.lease("jobs");
      expect((await client.nack("jobs", [m!])).deadLettered).toBe(1);
      const got = await client.getQueue("jobs");
      expect(got.counts).toMatchObject({ dead: 1, ready: 0 });
      const dead = await client.listDeadLetters("jobs");
      expect(dead.deadLetters.map((d) => [d.id, d.deliveryCount, d.event.data])).toEqual([[m!.id, 1, { x: 1 }]]);
      expect(dead.deadLetters[0]!.deadLetterTime.toISOString()).toBe("2026-01-01T00:00:00.000Z");
      expect(await client.replay("jobs", { from: new Date(Date.UTC(2025, 0, 1)), to: "2027-01-01T00:00:00Z" })).toEqual({ replayed: 1 });
      expect(await client.purge("jobs", "all")).toEqual({ purged: 1 });

      const sub = await client.createSubscription("to-jobs", { queue: "jobs", filter: { types: ["com.x.*"] } });
      expect(sub).toMatchObject({ name: `${testEnv}/subscriptions/to-jobs`, queue: `${testEnv}/queues/jobs`, filter: { types: ["com.x.*"], sources: [] } });
      expect((await client.getSubscription("to-jobs")).id).toBe(sub.id);
      expect((await client.listSubscriptions()).subscriptions).toHaveLength(1);
      expect((await client.updateSubscription("to-jobs", { filter: { sources: ["/a"] } })).filter).toEqual({ types: [], sources: ["/a"] });
      const published = await client.publish([{ id: "p", source: "/a", type: "any", data: 1 }]);
      expect(published.events[0]!.deliveries).toEqual([{ queue: `${testEnv}/queues/jobs`, messageId: expect.any(String) }]);
      await client.deleteSubscription("to-jobs");
      await client.deleteQueue("jobs");
      await expect(client.getQueue("jobs")).rejects.toMatchObject({ status: 404, code: "not_found" });
      await client.close();
      void h;
    });

    it("a refusal carries the answer's Retry-After: 10 s for a full disk, none where waiting cannot help", async () => {
      const { h, client } = await clientHarness(format);
      await client.createQueue("jobs");
      const cell = await h.registry.open(`${testEnv}/queues/jobs`);
      // The cell's own connection capped at its file's size: the next page is SQLITE_FULL, as on a full disk.
      const db = (cell as unknown as { store: { db: { pragma(text: string): unknown } } }).store.db;
      db.pragma("max_page_count = 1");
      const big = [{ id: "big", source: "/c", type: "t", datacontenttype: "text/plain", data: "x".repeat(100_000) }];
      const full = await client.send("jobs", big).catch((e: unknown) => e);
      expect(full).toMatchObject({ status: 503, code: "unavailable", retryable: true, retryAfterSeconds: 10 });
      const refused = await client.lease("jobs", { maxMessages: 101 }).catch((e: unknown) => e);
      expect(refused).toMatchObject({ status: 400, retryAfterSeconds: undefined });
      await client.close();
    });

    it("refusals are QueuesApiErrors with the code, field and bound", async () => {
      const { client } = await clientHarness(format);
      await client.createQueue("jobs");
      const error = await client.lease("jobs", { maxMessages: 101 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(QueuesApiError);
      expect(error).toMatchObject({ status: 400, code: "out_of_range", field: "max_messages", bound: "1 to 100", retryable: false });
      const send = await client.send("jobs", [{ id: "", source: "/c", type: "t" }]).catch((e: unknown) => e);
      expect(send).toMatchObject({ status: 400, field: "events[0].id" });
      const unauthorized = new QueuesClient({ url: (client as unknown as { origin: string }).origin, apiKey: "nope", env: testEnv, format });
      await expect(unauthorized.getQueue("jobs")).rejects.toMatchObject({ status: 401, code: "unauthenticated" });
      await unauthorized.close();
      await client.close();
    });
  });
}

describe("the client's connections", () => {
  for (const format of ["protobuf", "json"] as const) {
    it(`a long poll does not hold up a send, even with one connection (${format})`, async () => {
      const h = await apiHarness();
      await h.createQueue("jobs");
      await h.createQueue("other");
      const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv, format, connections: 1 });
      // The server's clock never moves: a send queued behind this poll would wait for ever.
      const polling = await h.whenWaiting(() => client.lease("jobs", { wait: 20 }));
      await client.send("other", [{ id: "beside", source: "/c", type: "t" }]);
      expect((await client.getQueue("other")).counts!.ready).toBe(1);
      await client.send("jobs", [{ id: "wake", source: "/c", type: "t" }]);
      expect((await polling.result).map((m) => m.event.id)).toEqual(["wake"]);
      await client.close();
    }, 10_000);
  }

  it("connections and longPollConnections are whole numbers from 1, or Infinity", () => {
    for (const option of ["connections", "longPollConnections"] as const) {
      for (const bad of [0, -1, 1.5, Number.NaN]) {
        expect(() => new QueuesClient({ url: "http://127.0.0.1:1", apiKey: "k", [option]: bad })).toThrow(
          new RangeError(`${option} must be a whole number from 1, or Infinity for no bound; got ${bad}`),
        );
      }
    }
  });
});

describe("the client's defaults", () => {
  it("speaks protobuf by default on the message routes", async () => {
    const h = await apiHarness();
    const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv });
    expect(client.format).toBe("protobuf");
    await client.close();
  });

  it("a call naming a queue by id alone needs the env option", async () => {
    const h = await apiHarness();
    const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey });
    await expect(client.getQueue("jobs")).rejects.toThrow("this call needs the client's env option, or a full resource name");
    await h.createQueue("jobs");
    expect((await client.getQueue(`${testEnv}/queues/jobs`)).name).toBe(`${testEnv}/queues/jobs`);
    await client.close();
  });
});
