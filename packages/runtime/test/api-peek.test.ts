import { describe, expect, it } from "vitest";
import { apiHarness, event } from "./api-harness.ts";

describe("GET .../queues/{queue}/messages (peek)", () => {
  it("lists waiting messages oldest first without leasing them, in pages", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const sent = await h.call("POST", `${path}:send`, { body: { events: [event("a"), event("b"), event("c")] } });
    await h.call("POST", `${path}:send`, { body: { events: [event("later")], delay: 60 } });
    const first = await h.call("GET", `${path}/messages?page_size=2`);
    expect(first.status).toBe(200);
    expect(first.json.messages).toEqual([
      {
        id: sent.json.message_ids[0],
        state: "ready",
        available_time: "2026-01-01T00:00:00.000Z",
        delivery_count: 0,
        send_time: "2026-01-01T00:00:00.000Z",
        content_type: "json",
        event: event("a"),
      },
      expect.objectContaining({ id: sent.json.message_ids[1], event: event("b") }),
    ]);
    const second = await h.call("GET", `${path}/messages?page_size=2&page_token=${first.json.next_page_token}`);
    expect(second.json.messages.map((m: { state: string; event: { id: string } }) => [m.event.id, m.state])).toEqual([
      ["c", "ready"],
      ["later", "delayed"],
    ]);
    expect(second.json.next_page_token).toBeUndefined();
    // Nothing was leased: all three ready ones are still there to lease, first delivery.
    const leased = await h.call("POST", `${path}:lease`, { body: { max_messages: 10 } });
    expect(leased.json.messages.map((m: { delivery_count: number }) => m.delivery_count)).toEqual([1, 1, 1]);
    expect((await h.call("GET", `${path}/messages`)).json.messages.map((m: { event: { id: string } }) => m.event.id)).toEqual(["later"]);
  });

  it("needs events:write: it shows message data", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const res = await h.call("GET", `${h.queuePath("jobs")}/messages`, { key: h.key(["events:read"]) });
    expect(res.status).toBe(403);
    expect(res.json.error).toMatchObject({ code: "permission_denied", required_scope: "events:write" });
    const big = await h.call("GET", `${h.queuePath("jobs")}/messages?page_size=101`);
    expect(big.json.error).toMatchObject({ code: "out_of_range", field: "page_size", bound: "1 to 100" });
  });
});
