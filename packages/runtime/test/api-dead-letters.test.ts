import { describe, expect, it } from "vitest";
import { apiHarness, event, eventually } from "./api-harness.ts";

type Harness = Awaited<ReturnType<typeof apiHarness>>;
type Leased = { id: string; lease_generation: number; delivery_count: number; event: Record<string, unknown> };

/** Sends one event per id and fails each once, so each is dead-lettered at the clock's time. */
async function deadLetter(h: Harness, path: string, ids: string[]): Promise<string[]> {
  const messageIds: string[] = [];
  for (const id of ids) {
    const sent = await h.call("POST", `${path}:send`, { body: { events: [event(id)] } });
    messageIds.push(sent.json.message_ids[0]);
    const [m] = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages as Leased[];
    const res = await h.call("POST", `${path}:nack`, { body: { messages: [{ id: m!.id, lease_generation: m!.lease_generation }] } });
    expect(res.json.dead_lettered).toBe(1);
  }
  return messageIds;
}

describe("dead letters", () => {
  it("lists the dead-letter set in pages, with the time each was dead-lettered and its event", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 1 });
    const path = h.queuePath("jobs");
    const ids = await deadLetter(h, path, ["a", "b", "c"]);
    const first = await h.call("GET", `${path}/dead-letters?page_size=2`);
    expect(first.status).toBe(200);
    expect(first.json.dead_letters).toEqual([
      {
        id: ids[0],
        dead_letter_time: "2026-01-01T00:00:00.000Z",
        delivery_count: 1,
        send_time: "2026-01-01T00:00:00.000Z",
        event: event("a"),
      },
      expect.objectContaining({ id: ids[1], event: event("b") }),
    ]);
    const second = await h.call("GET", `${path}/dead-letters?page_size=2&page_token=${first.json.next_page_token}`);
    expect(second.json.dead_letters.map((d: { id: string }) => d.id)).toEqual([ids[2]]);
    expect(second.json.next_page_token).toBeUndefined();
    const tooBig = await h.call("GET", `${path}/dead-letters?page_size=101`);
    expect(tooBig.json.error).toMatchObject({ code: "out_of_range", field: "page_size", bound: "1 to 100" });
  });

  it("lists in the order the messages were sent, not the order they died; replay picks by dead_letter_time", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 1 });
    const path = h.queuePath("jobs");
    const sent = await h.call("POST", `${path}:send`, { body: { events: [event("first"), event("second")] } });
    const leased = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages as Leased[];
    const nack = (m: Leased) => h.call("POST", `${path}:nack`, { body: { messages: [{ id: m.id, lease_generation: m.lease_generation }] } });
    await nack(leased[1]!);
    h.clock.advance(60_000);
    await nack(leased[0]!);
    const listed = (await h.call("GET", `${path}/dead-letters`)).json.dead_letters;
    expect(listed.map((d: { id: string; dead_letter_time: string }) => [d.id, d.dead_letter_time])).toEqual([
      [sent.json.message_ids[0], "2026-01-01T00:01:00.000Z"],
      [sent.json.message_ids[1], "2026-01-01T00:00:00.000Z"],
    ]);
    const replayed = await h.call("POST", `${path}:replay`, { body: { to: "2026-01-01T00:01:00Z" } });
    expect(replayed.json).toEqual({ replayed: 1 });
    const again = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages as Leased[];
    expect(again.map((m) => m.event["id"])).toEqual(["second"]);
  });

  it("replays all with a fresh delivery count, keeping ids and events", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 1 });
    const path = h.queuePath("jobs");
    const ids = await deadLetter(h, path, ["a", "b"]);
    const res = await h.call("POST", `${path}:replay`, { body: {} });
    expect(res.json).toEqual({ replayed: 2 });
    const leased = (await h.call("POST", `${path}:lease`, { body: { max_messages: 10 } })).json.messages as Leased[];
    expect(leased.map((m) => [m.id, m.delivery_count, m.event["id"]])).toEqual([
      [ids[0], 1, "a"],
      [ids[1], 1, "b"],
    ]);
    expect((await h.call("GET", path)).json.counts.dead).toBe(0);
  });

  it("replays only those dead-lettered in [from, to)", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 1 });
    const path = h.queuePath("jobs");
    await deadLetter(h, path, ["t0"]); // 00:00:00
    h.clock.advance(60_000);
    await deadLetter(h, path, ["t1"]); // 00:01:00
    h.clock.advance(60_000);
    await deadLetter(h, path, ["t2"]); // 00:02:00
    const res = await h.call("POST", `${path}:replay`, { body: { from: "2026-01-01T00:01:00Z", to: "2026-01-01T00:02:00Z" } });
    expect(res.json).toEqual({ replayed: 1 });
    const leased = (await h.call("POST", `${path}:lease`, { body: { max_messages: 10 } })).json.messages as Leased[];
    expect(leased.map((m) => m.event["id"])).toEqual(["t1"]);
    // An offset is honoured: 01:00+01:00 is 00:00Z, so only t0 falls in [23:59:59Z, 00:00:00.001Z).
    const offset = await h.call("POST", `${path}:replay`, { body: { from: "2025-12-31T23:59:59Z", to: "2026-01-01T01:00:00.001+01:00" } });
    expect(offset.json).toEqual({ replayed: 1 });
    const open = await h.call("POST", `${path}:replay`, { body: { from: "2026-01-01T00:01:30Z" } });
    expect(open.json).toEqual({ replayed: 1 });
    expect((await h.call("GET", path)).json.counts.dead).toBe(0);
  });

  it("purges the dead-letter set, or every message", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 1 });
    const path = h.queuePath("jobs");
    await deadLetter(h, path, ["a", "b"]);
    await h.call("POST", `${path}:send`, { body: { events: [event("live")] } });
    expect((await h.call("POST", `${path}:purge`, { body: { scope: "dead_letters" } })).json).toEqual({ purged: 2 });
    expect((await h.call("GET", path)).json.counts).toMatchObject({ dead: 0, ready: 1 });
    expect((await h.call("POST", `${path}:purge`, { body: { scope: "all" } })).json).toEqual({ purged: 1 });
    expect((await h.call("GET", path)).json.counts).toMatchObject({ dead: 0, ready: 0 });
  });

  it("a dead_letter_queue receives the event whole, and it can be leased there", async () => {
    const h = await apiHarness();
    await h.createQueue("dlq");
    await h.createQueue("jobs", { max_deliveries: 1, dead_letter_queue: "dlq" });
    const original = event("poison", { bad: true }, { subject: "order-7", traceparent: "00-abc-def-01" });
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [original] } });
    const [m] = (await h.call("POST", `${h.queuePath("jobs")}:lease`, { body: {} })).json.messages as Leased[];
    await h.call("POST", `${h.queuePath("jobs")}:nack`, { body: { messages: [{ id: m!.id, lease_generation: m!.lease_generation }] } });
    await eventually(async () => (await h.call("GET", h.queuePath("dlq"))).json.counts.ready === 1);
    const [dead] = (await h.call("POST", `${h.queuePath("dlq")}:lease`, { body: {} })).json.messages as Leased[];
    expect(dead!.id).toBe(m!.id);
    expect(dead!.event).toEqual(original);
    expect((await h.call("GET", h.queuePath("jobs"))).json.counts).toMatchObject({ dead: 0, moving_to_dead_letter_queue: 0 });
  });
});
