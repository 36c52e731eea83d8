import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CellRegistry, ManualClock, UlidSource, limits } from "@celld/queue-cell";
import { Catalog } from "../src/api/catalog.ts";
import { eventFromJson, eventsToMessages } from "../src/api/cloudevents.ts";
import { ApiError } from "../src/wire/api-error.ts";
import { apiLimits } from "../src/api/index.ts";
import { QueueDirectory } from "../src/api/queue-directory.ts";
import { publish } from "../src/api/subscriptions.ts";
import { apiHarness, event, testEnv } from "./api-harness.ts";

type Harness = Awaited<ReturnType<typeof apiHarness>>;
const subs = `/v1/${testEnv}/subscriptions`;
const publishPath = `/v1/${testEnv}/events:publish`;

async function leasedIds(h: Harness, queue: string): Promise<string[]> {
  const res = await h.call("POST", `${h.queuePath(queue)}:lease`, { body: { max_messages: 100 } });
  return res.json.messages.map((m: { event: { id: string } }) => m.event.id);
}

describe("subscriptions", () => {
  it("create, get, list, update, delete", async () => {
    const h = await apiHarness();
    await h.createQueue("orders");
    await h.createQueue("audit");
    const created = await h.call("POST", subs, { body: { name: "new-orders", queue: "orders", filter: { types: ["com.shop.order.created"] } } });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      name: `${subs.slice(4)}/new-orders`,
      id: expect.stringMatching(/^sub_[0-9A-HJKMNP-TV-Z]{26}$/),
      queue: `${testEnv}/queues/orders`,
      filter: { types: ["com.shop.order.created"], sources: [] },
      create_time: "2026-01-01T00:00:00.000Z",
      update_time: "2026-01-01T00:00:00.000Z",
    });
    expect((await h.call("GET", `${subs}/new-orders`)).json).toEqual(created.json);
    await h.call("POST", subs, { body: { name: "everything", queue: `${testEnv}/queues/audit` } });
    const list = await h.call("GET", `${subs}?page_size=1`);
    expect(list.json.subscriptions.map((s: { name: string }) => s.name.split("/").pop())).toEqual(["everything"]);
    const rest = await h.call("GET", `${subs}?page_token=${list.json.next_page_token}`);
    expect(rest.json.subscriptions.map((s: { name: string }) => s.name.split("/").pop())).toEqual(["new-orders"]);
    h.clock.advance(1000);
    const updated = await h.call("PATCH", `${subs}/new-orders`, { body: { queue: "audit", filter: { sources: ["/shop/*"] } } });
    expect(updated.json).toMatchObject({ queue: `${testEnv}/queues/audit`, filter: { types: [], sources: ["/shop/*"] }, update_time: "2026-01-01T00:00:01.000Z" });
    expect((await h.call("DELETE", `${subs}/new-orders`)).status).toBe(200);
    expect((await h.call("GET", `${subs}/new-orders`)).status).toBe(404);
    expect((await h.call("DELETE", `${subs}/new-orders`)).status).toBe(404);
  });

  it("refuses a duplicate, an unknown queue, a bad pattern and unknown filter fields", async () => {
    const h = await apiHarness();
    await h.createQueue("orders");
    await h.call("POST", subs, { body: { name: "s", queue: "orders" } });
    expect((await h.call("POST", subs, { body: { name: "s", queue: "orders" } })).json.error).toMatchObject({ code: "already_exists", field: "name" });
    expect((await h.call("POST", subs, { body: { name: "t", queue: "nope" } })).json.error).toMatchObject({ code: "invalid_argument", field: "queue" });
    expect((await h.call("POST", subs, { body: { name: "t", queue: "orders", filter: { types: ["a*b"] } } })).json.error).toMatchObject({
      code: "invalid_argument",
      field: "filter.types[0]",
    });
    expect((await h.call("POST", subs, { body: { name: "t", queue: "orders", filter: { type: ["a"] } } })).json.error).toMatchObject({
      code: "unknown_field",
      field: "filter.type",
    });
    const many = Array.from({ length: apiLimits.subscriptionPatternsMax + 1 }, (_, i) => `t${i}`);
    expect((await h.call("POST", subs, { body: { name: "t", queue: "orders", filter: { types: many } } })).json.error).toMatchObject({
      code: "out_of_range",
      field: "filter.types",
    });
    expect((await h.call("POST", subs, { body: { name: "t", queue: "orders", filter: { types: many.slice(1) } } })).status).toBe(201);
  });

  it("at most the per-environment bound of subscriptions", async () => {
    const h = await apiHarness();
    await h.createQueue("orders");
    for (let i = 0; i < apiLimits.subscriptionsPerEnvMax; i++) {
      expect((await h.call("POST", subs, { body: { name: `s${i}`, queue: "orders" } })).status).toBe(201);
    }
    const over = await h.call("POST", subs, { body: { name: "one-more", queue: "orders" } });
    expect(over.status).toBe(400);
    expect(over.json.error).toMatchObject({ code: "out_of_range", bound: `at most ${apiLimits.subscriptionsPerEnvMax} subscriptions per environment` });
  });

  it("publishing fans an event out to every matching queue, once each", async () => {
    const h = await apiHarness();
    for (const q of ["orders", "audit", "shipping", "other"]) await h.createQueue(q);
    await h.call("POST", subs, { body: { name: "orders-created", queue: "orders", filter: { types: ["com.shop.order.created"] } } });
    // Two subscriptions of one queue that both match: the queue still gets the event once.
    await h.call("POST", subs, { body: { name: "orders-any", queue: "orders", filter: { types: ["com.shop.order.*"] } } });
    await h.call("POST", subs, { body: { name: "audit-all", queue: "audit" } });
    await h.call("POST", subs, { body: { name: "shipping", queue: "shipping", filter: { types: ["com.shop.order.*"], sources: ["/shop/eu"] } } });
    await h.call("POST", subs, { body: { name: "other", queue: "other", filter: { types: ["com.bank.*"] } } });

    const res = await h.call("POST", publishPath, {
      body: {
        events: [
          event("e1", { n: 1 }, { type: "com.shop.order.created", source: "/shop/eu" }),
          event("e2", { n: 2 }, { type: "com.shop.order.paid", source: "/shop/us" }),
          event("e3", { n: 3 }, { type: "com.shop.cart.updated", source: "/shop/eu" }),
        ],
      },
    });
    expect(res.status).toBe(200);
    const queuesOf = (i: number) => res.json.events[i].deliveries.map((d: { queue: string }) => d.queue.split("/").pop()).sort();
    expect(queuesOf(0)).toEqual(["audit", "orders", "shipping"]);
    expect(queuesOf(1)).toEqual(["audit", "orders"]);
    expect(queuesOf(2)).toEqual(["audit"]);
    expect(await leasedIds(h, "orders")).toEqual(["e1", "e2"]);
    expect(await leasedIds(h, "audit")).toEqual(["e1", "e2", "e3"]);
    expect(await leasedIds(h, "shipping")).toEqual(["e1"]);
    expect(await leasedIds(h, "other")).toEqual([]);
    const [first] = res.json.events[0].deliveries;
    expect(first.message_id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  it("an event no subscription matches goes nowhere; a bad event refuses the whole publish", async () => {
    const h = await apiHarness();
    await h.createQueue("orders");
    await h.call("POST", subs, { body: { name: "s", queue: "orders", filter: { types: ["x"] } } });
    const none = await h.call("POST", publishPath, { body: { events: [event("e1")] } });
    expect(none.json).toEqual({ events: [{ deliveries: [] }] });
    const bad = await h.call("POST", publishPath, { body: { events: [event("ok", 1, { type: "x" }), event("bad", 1, { type: "" })] } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.field).toBe("events[1].type");
    expect(await leasedIds(h, "orders")).toEqual([]);
  });

  it("other environments' subscriptions and queues are untouched by a publish", async () => {
    const h = await apiHarness();
    const staging = "orgs/acme/projects/shop/envs/staging";
    await h.createQueue("orders");
    await h.createQueue("orders", {}, staging);
    const stagingKey = h.key(undefined, staging);
    await h.call("POST", `/v1/${staging}/subscriptions`, { key: stagingKey, body: { name: "s", queue: "orders" } });
    await h.call("POST", publishPath, { body: { events: [event("prod-only")] } });
    const stagingLease = await h.call("POST", `/v1/${staging}/queues/orders:lease`, { key: stagingKey, body: {} });
    expect(stagingLease.json.messages).toEqual([]);
  });
});

describe("publish when a queue refuses", () => {
  it("the error names the queues that committed and the ones that refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "celld-publish-"));
    const clock = new ManualClock();
    const registry = new CellRegistry({ dataDir: dir, clock, durability: "off" });
    const catalog = Catalog.open(dir);
    try {
      const directory = new QueueDirectory(catalog, registry, clock, new UlidSource());
      const settings = { visibilityTimeout: 30, maxDeliveries: 5, deliveryDelay: 0, deadLetterQueue: null };
      for (const q of ["calm", "busy"]) await directory.create(testEnv, q, settings);
      for (const q of ["calm", "busy"]) {
        catalog.insertSubscription(
          { name: `${testEnv}/subscriptions/${q}`, env: testEnv, subscription: q, subscriptionId: `sub_${q}`, queue: `${testEnv}/queues/${q}`, types: [], sources: [], createMs: 0, updateMs: 0 },
          apiLimits.subscriptionsPerEnvMax,
        );
      }
      const busy = await registry.open(`${testEnv}/queues/busy`);
      const flood = Array.from({ length: limits.producerCallsInFlightMax }, () =>
        busy.send([{ body: new Uint8Array([1]), contentType: "bytes" }]),
      );
      const events = [eventFromJson(event("e1"), "events[0]")];
      const error = await publish(catalog, directory, testEnv, events, eventsToMessages(events, "events")).catch((e: unknown) => e);
      await Promise.all(flood);
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).toJSON().error).toMatchObject({
        code: "overloaded",
        committed_queues: [`${testEnv}/queues/calm`],
        failed_queues: [`${testEnv}/queues/busy`],
      });
      const calm = await registry.open(`${testEnv}/queues/calm`);
      expect((await calm.counts()).ready).toBe(1);
    } finally {
      await registry.closeAll();
      catalog.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
