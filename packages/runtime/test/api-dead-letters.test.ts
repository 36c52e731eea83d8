import { describe, expect, it } from "vitest";
import type { QueueCell } from "@celld/queue-cell";
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

describe("a purge or a replay the queue's close interrupts part way", () => {
  const messages = 10_100;

  /** The queue's cell, holding `messages` messages (dead ones if `dead`), filled straight through it. */
  async function filled(h: Harness, queue: string, dead: boolean): Promise<{ cellName: string; cell: QueueCell }> {
    await h.createQueue(queue, { max_deliveries: 1 });
    await h.call("POST", `${h.queuePath(queue)}:send`, { body: { events: [event("first")] } });
    const names = h.registry.openNames();
    expect(names).toHaveLength(1);
    const cellName = names[0]!;
    const cell = await h.registry.open(cellName);
    // One message a send, so each is a row of its own (a batch is stored as one row, a group
    // counts rows), 250 sends at once.
    for (let sent = 1; sent < messages; sent += 250) {
      const count = Math.min(250, messages - sent);
      await Promise.all(Array.from({ length: count }, (_, i) => cell.send([{ body: new TextEncoder().encode(`m${sent + i}`), contentType: "text" }])));
    }
    if (dead) {
      for (let leased = await cell.lease({ max: 100 }); leased.length > 0; leased = await cell.lease({ max: 100 })) {
        await cell.nack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
      }
    }
    return { cellName, cell };
  }

  /**
   * Closes the cell (as celld stopping does) right after the first group of the call runs `step`
   * on its store: the group after it is written by the close, and the one after that is refused.
   */
  function closeAfterFirstGroup(h: Harness, cellName: string, cell: QueueCell, step: "purge" | "deadInRange"): void {
    const store = (cell as unknown as { store: Record<string, (...args: unknown[]) => unknown> }).store;
    const original = store[step]!;
    let armed = true;
    store[step] = (...args: unknown[]) => {
      if (armed) {
        armed = false;
        setImmediate(() => void h.registry.close(cellName));
      }
      return original.apply(store, args);
    };
  }

  it("a purge answers 503 saying part of it may be done and that repeating it is safe; the repeat deletes the rest", async () => {
    const h = await apiHarness();
    const path = h.queuePath("jobs");
    const { cellName, cell } = await filled(h, "jobs", false);
    closeAfterFirstGroup(h, cellName, cell, "purge");
    const interrupted = await h.call("POST", `${path}:purge`, { body: { scope: "all" } });
    expect(interrupted.status).toBe(503);
    expect(interrupted.headers["retry-after"]).toBe("1");
    expect(interrupted.json.error).toEqual({
      code: "unavailable",
      message:
        "the queue cell is closed; part of this purge may have been done (it deletes in groups, and the groups done stay deleted); " +
        "repeating it is safe: it deletes what is left (with what has come into its scope since)",
    });
    // Before, it said "nothing of this call was written", with 10,000 of them deleted.
    expect((await h.call("GET", path)).json.counts.ready).toBe(100);
    expect((await h.call("POST", `${path}:purge`, { body: { scope: "all" } })).json).toEqual({ purged: 100 });
    expect((await h.call("GET", path)).json.counts.ready).toBe(0);
  }, 30_000);

  it("a replay answers the same; its repeat replays only what is still dead, and no message is copied", async () => {
    const h = await apiHarness();
    const path = h.queuePath("jobs");
    const { cellName, cell } = await filled(h, "jobs", true);
    expect((await h.call("GET", path)).json.counts).toMatchObject({ ready: 0, dead: messages });
    closeAfterFirstGroup(h, cellName, cell, "deadInRange");
    const interrupted = await h.call("POST", `${path}:replay`, { body: {} });
    expect(interrupted.status).toBe(503);
    expect(interrupted.headers["retry-after"]).toBe("1");
    expect(interrupted.json.error.code).toBe("unavailable");
    expect(interrupted.json.error.message).toBe(
      "the queue cell is closed; part of this replay may have been done (it returns dead letters to ready in groups, and the groups done stay replayed); " +
        "repeating it is safe: what was replayed is no longer a dead letter, so a repeat returns only what is still in the dead-letter set " +
        "(with what has been dead-lettered in its range since), and no message is ever copied",
    );
    expect((await h.call("GET", path)).json.counts).toMatchObject({ ready: messages - 100, dead: 100 });
    expect((await h.call("POST", `${path}:replay`, { body: {} })).json).toEqual({ replayed: 100 });
    expect((await h.call("GET", path)).json.counts).toMatchObject({ ready: messages, dead: 0, leased: 0 });
  }, 30_000);
});
