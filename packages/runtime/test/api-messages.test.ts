import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { limits } from "@celld/queue-cell";
import { leaseForClient } from "../src/api/lease-handoff.ts";
import { apiHarness, event, eventually, testEnv } from "./api-harness.ts";

type Leased = { id: string; lease_generation: number; delivery_count: number; event: Record<string, unknown> };
const ref = (m: Leased) => ({ id: m.id, lease_generation: m.lease_generation });

describe("send, lease, ack, nack", () => {
  it("send answers with the message ids; a lease carries id, generation, delivery count and the event", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const sent = await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [event("a"), event("b")] } });
    expect(sent.status).toBe(200);
    expect(sent.json.message_ids).toHaveLength(2);
    const leased = await h.call("POST", `${h.queuePath("jobs")}:lease`, { body: { max_messages: 100 } });
    expect(leased.json.messages).toEqual([
      {
        id: sent.json.message_ids[0],
        lease_generation: 1,
        delivery_count: 1,
        lease_expire_time: "2026-01-01T00:00:30.000Z",
        send_time: "2026-01-01T00:00:00.000Z",
        event: { specversion: "1.0", id: "a", source: "/tests", type: "test.event", data: { n: "a" } },
      },
      expect.objectContaining({ id: sent.json.message_ids[1], event: expect.objectContaining({ id: "b" }) }),
    ]);
  });

  it("an event comes back as sent, its time normalized to UTC", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const sent = event("t", [1, "two", { three: null }], { subject: "s", time: "2026-01-01T01:00:00.25+01:00", partitionkey: "p", n: -5, ok: false });
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [sent] } });
    const [m] = (await h.call("POST", `${h.queuePath("jobs")}:lease`, { body: {} })).json.messages as Leased[];
    expect(m!.event).toEqual({ ...sent, time: "2026-01-01T00:00:00.250Z" });
  });

  it("a lease takes at most max_messages, and defaults to the queue's visibility timeout", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { visibility_timeout: 90 });
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [event("a"), event("b"), event("c")] } });
    const two = await h.call("POST", `${h.queuePath("jobs")}:lease`, { body: { max_messages: 2 } });
    expect(two.json.messages).toHaveLength(2);
    expect(two.json.messages[0].lease_expire_time).toBe("2026-01-01T00:01:30.000Z");
    const rest = await h.call("POST", `${h.queuePath("jobs")}:lease`, { body: { visibility_timeout: 5 } });
    expect(rest.json.messages).toHaveLength(1);
    expect(rest.json.messages[0].lease_expire_time).toBe("2026-01-01T00:00:05.000Z");
    const none = await h.call("POST", `${h.queuePath("jobs")}:lease`, { body: {} });
    expect(none.json.messages).toEqual([]);
  });

  it("delay hides a send; the queue's delivery_delay applies when the send names none", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { delivery_delay: 10 });
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("default")] } });
    await h.call("POST", `${path}:send`, { body: { events: [event("explicit")], delay: 30 } });
    await h.call("POST", `${path}:send`, { body: { events: [event("now")], delay: 0 } });
    const lease = async (): Promise<string[]> => {
      const messages = (await h.call("POST", `${path}:lease`, { body: { max_messages: 10 } })).json.messages as Leased[];
      if (messages.length > 0) await h.call("POST", `${path}:ack`, { body: { messages: messages.map(ref) } });
      return messages.map((m) => m.event["id"] as string);
    };
    expect(await lease()).toEqual(["now"]);
    h.clock.advance(10_000);
    expect(await lease()).toEqual(["default"]);
    h.clock.advance(20_000);
    expect(await lease()).toEqual(["explicit"]);
  });

  it("ack removes; nack returns at once or after its delay; each answers its counts", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("a"), event("b"), event("c")] } });
    const [a, b, c] = (await h.call("POST", `${path}:lease`, { body: { max_messages: 3 } })).json.messages as Leased[];
    const acked = await h.call("POST", `${path}:ack`, { body: { messages: [ref(a!)] } });
    expect(acked.json).toEqual({ acked: 1, retried: 0, dead_lettered: 0, stale_leases: [] });
    const nacked = await h.call("POST", `${path}:nack`, { body: { messages: [ref(b!), { ...ref(c!), delay: 60 }], delay: 5 } });
    expect(nacked.json).toEqual({ acked: 0, retried: 2, dead_lettered: 0, stale_leases: [] });
    expect((await h.call("POST", `${path}:lease`, { body: {} })).json.messages).toEqual([]);
    h.clock.advance(5_000);
    const again = (await h.call("POST", `${path}:lease`, { body: { max_messages: 10 } })).json.messages as Leased[];
    expect(again.map((m) => [m.event["id"], m.delivery_count, m.lease_generation])).toEqual([["b", 2, 2]]);
    await h.call("POST", `${path}:ack`, { body: { messages: again.map(ref) } });
    h.clock.advance(55_000);
    expect((await h.call("POST", `${path}:lease`, { body: {} })).json.messages.map((m: Leased) => m.event["id"])).toEqual(["c"]);
  });

  it("a nack on the last allowed delivery dead-letters the message", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 2 });
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("a")] } });
    for (const expected of [{ retried: 1, dead_lettered: 0 }, { retried: 0, dead_lettered: 1 }]) {
      const [m] = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages as Leased[];
      const res = await h.call("POST", `${path}:nack`, { body: { messages: [ref(m!)] } });
      expect(res.json).toMatchObject(expected);
    }
    expect((await h.call("GET", path)).json.counts).toMatchObject({ ready: 0, dead: 1 });
  });
});

describe("fencing, end to end", () => {
  it("a worker whose lease expired acks after another leased the message: stale, and the message stays", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("a")] } });
    const [slow] = (await h.call("POST", `${path}:lease`, { body: { visibility_timeout: 10 } })).json.messages as Leased[];
    h.clock.advance(10_000);
    const [fast] = (await h.call("POST", `${path}:lease`, { body: { visibility_timeout: 60 } })).json.messages as Leased[];
    expect(fast!.id).toBe(slow!.id);
    expect(fast!.lease_generation).toBe(slow!.lease_generation + 1);
    expect(fast!.delivery_count).toBe(2);

    const late = await h.call("POST", `${path}:ack`, { body: { messages: [ref(slow!)] } });
    expect(late.json).toEqual({ acked: 0, retried: 0, dead_lettered: 0, stale_leases: [ref(slow!)] });
    const lateNack = await h.call("POST", `${path}:nack`, { body: { messages: [ref(slow!)] } });
    expect(lateNack.json.stale_leases).toEqual([ref(slow!)]);
    expect((await h.call("GET", path)).json.counts).toMatchObject({ leased: 1, ready: 0 });

    const current = await h.call("POST", `${path}:ack`, { body: { messages: [ref(fast!)] } });
    expect(current.json).toEqual({ acked: 1, retried: 0, dead_lettered: 0, stale_leases: [] });
    expect((await h.call("GET", path)).json.counts).toMatchObject({ leased: 0, ready: 0 });
  });

  it("a retried ack answers stale, as for a message someone else holds; after a nack the same reference applies until the next lease", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("a"), event("b")] } });
    const [a, b] = (await h.call("POST", `${path}:lease`, { body: { max_messages: 2 } })).json.messages as Leased[];
    expect((await h.call("POST", `${path}:ack`, { body: { messages: [ref(a!)] } })).json.acked).toBe(1);
    // The first answer lost, the ack sent again: nothing tells it from "someone else has it now".
    const retried = await h.call("POST", `${path}:ack`, { body: { messages: [ref(a!)] } });
    expect(retried.json).toEqual({ acked: 0, retried: 0, dead_lettered: 0, stale_leases: [ref(a!)] });

    const delayed = { ...ref(b!), delay: 60 };
    expect((await h.call("POST", `${path}:nack`, { body: { messages: [delayed] } })).json.retried).toBe(1);
    expect((await h.call("POST", `${path}:nack`, { body: { messages: [ref(b!)] } })).json.retried).toBe(1);
    const [again] = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages as Leased[];
    expect(again!.lease_generation).toBe(b!.lease_generation + 1);
    expect((await h.call("POST", `${path}:ack`, { body: { messages: [ref(b!)] } })).json.stale_leases).toEqual([ref(b!)]);
  });

  it("stale and live references in one call: only the live ones apply", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("a"), event("b")] } });
    const [a, b] = (await h.call("POST", `${path}:lease`, { body: { max_messages: 2 } })).json.messages as Leased[];
    const unknown = { id: "01KDVDNA000000000000000000", lease_generation: 1 };
    const res = await h.call("POST", `${path}:ack`, {
      body: { messages: [ref(a!), { id: b!.id, lease_generation: b!.lease_generation + 1 }, unknown] },
    });
    expect(res.json).toEqual({
      acked: 1,
      retried: 0,
      dead_lettered: 0,
      stale_leases: [{ id: b!.id, lease_generation: b!.lease_generation + 1 }, unknown],
    });
  });
});

describe("long poll", () => {
  it("answers as soon as a message is sent, without the clock moving", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const started = h.clock.now();
    const polling = await h.whenWaiting(() => h.call("POST", `${path}:lease`, { body: { wait: limits.leaseWaitSecondsMax } }));
    await h.call("POST", `${path}:send`, { body: { events: [event("wake")] } });
    const res = await polling.result;
    expect(res.json.messages.map((m: Leased) => m.event["id"])).toEqual(["wake"]);
    expect(h.clock.now()).toBe(started);
  });

  it("answers a delayed message when it becomes ready, and empty when the wait runs out", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("later")], delay: 5 } });
    const polling = await h.whenWaiting(() => h.call("POST", `${path}:lease`, { body: { wait: 20 } }));
    h.clock.advance(5_000);
    expect((await polling.result).json.messages.map((m: Leased) => m.event["id"])).toEqual(["later"]);

    const empty = await h.whenWaiting(() => h.call("POST", `${path}:lease`, { body: { wait: 20 } }));
    h.clock.advance(19_999);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await Promise.race([empty.result.then(() => "answered"), new Promise((r) => setTimeout(() => r("waiting"), 50))])).toBe("waiting");
    h.clock.advance(1);
    expect((await empty.result).json.messages).toEqual([]);
  });

  it("stops cleanly when the client goes away: nothing is held for the vanished client", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    for (let round = 0; round < 5; round++) {
      const controller = new AbortController();
      const polling = await h.whenWaiting(() => h.call("POST", `${path}:lease`, { body: { wait: 20 }, signal: controller.signal }));
      controller.abort();
      await expect(polling.result).rejects.toThrow();
      // Sent right as the server learns of the disconnect: whichever comes first, the message
      // must end up ready, with no delivery counted, and not leased by the vanished poll.
      await h.call("POST", `${path}:send`, { body: { events: [event(`m${round}`)] } });
      await eventually(async () => (await h.call("GET", path)).json.counts.ready === 1);
      const [m] = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages as Leased[];
      expect(m!.event["id"]).toBe(`m${round}`);
      expect(m!.delivery_count).toBe(1);
      await h.call("POST", `${path}:ack`, { body: { messages: [ref(m!)] } });
    }
  });

  it("messages leased for a client that is gone by the time the lease returns are released, uncounted", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [event("a"), event("b")] } });
    const cell = await h.registry.open(`${testEnv}/queues/jobs`);
    const gone = new AbortController();
    // The lease runs in the cell's next group; the client is gone before it returns.
    const leasing = leaseForClient(cell, { max: 10 }, gone.signal);
    gone.abort();
    expect(await leasing).toEqual([]);
    expect(await cell.counts()).toMatchObject({ ready: 2, leased: 0 });
    const again = await cell.lease({ max: 10 });
    expect(again.map((m) => m.deliveries)).toEqual([1, 1]);
    // The released lease (the first, generation 1) is spent: its holder can never settle the message.
    expect(again.every((m) => m.leaseGeneration > 1)).toBe(true);
    const late = await cell.ack(again.map((m) => ({ id: m.id, leaseGeneration: 1 })));
    expect(late.staleLeases).toHaveLength(2);
  });

  it("a lease leaves nothing attached to the server's long-lived stop signal once it returns", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const cell = await h.registry.open(`${testEnv}/queues/jobs`);
    const stopping = new AbortController();
    for (let i = 0; i < 200; i++) {
      await leaseForClient(cell, { max: 1 }, new AbortController().signal, [stopping.signal, new AbortController().signal]);
    }
    // AbortSignal.any kept one dependant a call on Node 20, collected or not: a leak of every lease.
    const dependants = Object.getOwnPropertySymbols(stopping.signal).find((s) => s.description === "kDependantSignals");
    const kept = dependants === undefined ? undefined : (stopping.signal as unknown as Record<symbol, Set<unknown> | undefined>)[dependants];
    expect(kept?.size ?? 0).toBe(0);
    expect(getEventListeners(stopping.signal, "abort")).toHaveLength(0);
    // Still one signal: a stop ends a waiting lease.
    const waiting = leaseForClient(cell, { max: 1, waitSeconds: 20 }, new AbortController().signal, [stopping.signal]);
    stopping.abort();
    expect(await waiting).toEqual([]);
  });

  it("many polls waiting at once raise no listener-leak warning", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning.name);
    process.on("warning", onWarning);
    try {
      const polls = [];
      for (let i = 0; i < 12; i++) {
        polls.push(await h.whenWaiting(() => h.call("POST", `${h.queuePath("jobs")}:lease`, { body: { wait: 20 } })));
      }
      await h.server.close();
      for (const poll of polls) expect((await poll.result).status).toBe(200);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings).toEqual([]);
  });

  it("the server stopping answers a waiting poll empty", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const polling = await h.whenWaiting(() => h.call("POST", `${h.queuePath("jobs")}:lease`, { body: { wait: 20 } }));
    await h.server.close();
    const res = await polling.result;
    expect(res.status).toBe(200);
    expect(res.json.messages).toEqual([]);
  });
});
