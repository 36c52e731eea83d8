import { describe, expect, it } from "vitest";
import { limits } from "@celld/queue-cell";
import { apiLimits } from "../src/api/index.ts";
import { apiHarness, event, eventually, testEnv, unreadLease } from "./api-harness.ts";

describe("answers written and not yet read have a server-wide bound", () => {
  it("is 256 MiB by default", () => {
    expect(apiLimits.answerBytesPendingMax).toBe(256 * 1024 * 1024);
  });

  it("while a client that does not read holds more than it, leases and dead-letter pages are refused before any work, and taken again once it goes", async () => {
    // Without it, every connection whose client did not read held its answer (a lease of 100
    // large messages, about 16 MB) until the idle timeout, however many there were.
    const budget = 1_000_000;
    const h = await apiHarness({ answerBytesPendingMax: budget });
    await h.createQueue("big", { max_deliveries: 1 });
    const data = "x".repeat(limits.messageBytesMax - 1_000);
    for (let i = 0; i < 110; i++) {
      const sent = await h.call("POST", `${h.queuePath("big")}:send`, { body: { events: [event(`e${i}`, data)] } });
      expect(sent.status).toBe(200);
    }
    // One dead letter, for the page that lists it.
    const dead = await h.call("POST", `${h.queuePath("big")}:lease`, { body: { max_messages: 1 } });
    const nacked = await h.call("POST", `${h.queuePath("big")}:nack`, { body: { messages: [{ id: dead.json.messages[0].id, lease_generation: 1 }] } });
    expect(nacked.json.dead_lettered).toBe(1);

    const socket = await unreadLease(h.server.url, h.defaultKey, "big");
    const counts = async () => (await h.call("GET", h.queuePath("big"))).json.counts;
    // About 13 MB: more than the kernel's buffers take, so most of it stays in the server.
    await eventually(async () => (await counts()).leased === 100);

    const refused = await h.call("POST", `${h.queuePath("big")}:lease`, { body: { max_messages: 1 } });
    expect(refused.status).toBe(503);
    expect(refused.headers["retry-after"]).toBe("1");
    expect(refused.json.error.code).toBe("unavailable");
    expect(refused.json.error.bound).toBe(`at most ${budget} bytes of answers not yet read by their clients, server-wide`);
    expect(refused.json.error.message).toContain(`(at most ${budget} bytes of answers`);
    // Nothing was leased for it: the nine left are still ready.
    expect(await counts()).toMatchObject({ ready: 9, leased: 100 });

    const protobuf = await h.call("POST", `${h.queuePath("big")}:lease`, {
      raw: new Uint8Array(0),
      headers: { "content-type": "application/x-protobuf" },
    });
    expect(protobuf.status).toBe(503);
    const page = await h.call("GET", `${h.queuePath("big")}/dead-letters`);
    expect(page.status).toBe(503);
    expect(page.json.error.bound).toBe(refused.json.error.bound);
    expect((await h.call("GET", `/v1/${testEnv}/subscriptions`)).status).toBe(503);
    // A publish commits before it answers, so it is refused before it runs.
    expect((await h.call("POST", `/v1/${testEnv}/events:publish`, { body: { events: [event("p")] } })).status).toBe(503);
    // Small answers are still given.
    expect((await h.call("GET", h.queuePath("big"))).status).toBe(200);

    // Once the connection goes, its bytes leave the budget (and its lease is handed back).
    socket.destroy();
    await eventually(async () => (await h.call("GET", `${h.queuePath("big")}/dead-letters`)).status === 200);
    const leased = await h.call("POST", `${h.queuePath("big")}:lease`, { body: { max_messages: 1 } });
    expect(leased.status).toBe(200);
    expect(leased.json.messages).toHaveLength(1);
  }, 20_000);

  it("an answer built while others filled the budget is not written, and its messages are handed back uncounted", async () => {
    // Long polls pass the first check when they start: by the time they answer it may be full.
    const budget = 1_000_000;
    const h = await apiHarness({ answerBytesPendingMax: budget });
    await h.createQueue("big");
    await h.createQueue("small");
    const waiting = await h.whenWaiting(() => h.call("POST", `${h.queuePath("small")}:lease`, { body: { max_messages: 1, wait: 20 } }));
    const data = "x".repeat(limits.messageBytesMax - 1_000);
    for (let i = 0; i < 100; i++) {
      expect((await h.call("POST", `${h.queuePath("big")}:send`, { body: { events: [event(`e${i}`, data)] } })).status).toBe(200);
    }
    const socket = await unreadLease(h.server.url, h.defaultKey, "big");
    await eventually(async () => (await h.call("GET", h.queuePath("big"))).json.counts.leased === 100);

    expect((await h.call("POST", `${h.queuePath("small")}:send`, { body: { events: [event("s")] } })).status).toBe(200);
    const answer = await waiting.result;
    expect(answer.status).toBe(503);
    expect(answer.json.error.code).toBe("unavailable");
    const small = (await h.call("GET", h.queuePath("small"))).json.counts;
    expect(small).toMatchObject({ ready: 1, leased: 0 });
    socket.destroy();
    await eventually(async () => (await h.call("GET", `${h.queuePath("small")}/dead-letters`)).status === 200);
    // Handed back without counting a delivery.
    const again = await h.call("POST", `${h.queuePath("small")}:lease`, { body: {} });
    expect(again.status).toBe(200);
    expect(again.json.messages.map((m: { delivery_count: number }) => m.delivery_count)).toEqual([1]);
  }, 20_000);
});
