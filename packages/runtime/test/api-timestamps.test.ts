import { describe, expect, it } from "vitest";
import { decodeProto, encodeProto, int64ToNumber } from "../src/wire/proto-codec.ts";
import { formatRfc3339, parseRfc3339 } from "../src/wire/timestamps.ts";
import { apiHarness, event } from "./api-harness.ts";

/** [text, seconds since the epoch]: the seconds are what a protobuf Timestamp carries. */
const early: Array<[string, number]> = [
  // Go's zero time.Time, and protobuf's earliest Timestamp.
  ["0001-01-01T00:00:00Z", -62135596800],
  ["0099-12-31T23:59:59.999999999Z", -59011459201],
  ["0100-01-01T00:00:00Z", -59011459200],
  ["9999-12-31T23:59:59.999999999Z", 253402300799],
];

describe("RFC 3339 times far from now", () => {
  it.each(early)("%s is read as written and formatted back unchanged", (text, seconds) => {
    const instant = parseRfc3339(text);
    expect(instant?.seconds).toBe(seconds);
    expect(formatRfc3339(instant!)).toBe(text);
  });

  it("a leap day is checked against the year as written: 0096 has one, 0100 has none", () => {
    expect(parseRfc3339("0096-02-29T00:00:00Z")?.seconds).toBe(-59132592000);
    expect(parseRfc3339("0100-02-29T00:00:00Z")).toBeUndefined();
  });

  it("an event's time before 1970 comes back exactly, in JSON and in protobuf", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const sent = early.map(([time], i) => event(`e${i}`, i, { time }));
    await h.call("POST", `${path}:send`, { body: { events: sent } });
    const json = await h.call("POST", `${path}:lease`, { body: { max_messages: 10, visibility_timeout: 1 } });
    expect(json.json.messages.map((m: { event: unknown }) => m.event)).toEqual(sent);
    h.clock.advance(1_000);
    const res = await h.call("POST", `${path}:lease`, {
      raw: encodeProto("LeaseRequest", { max_messages: 10 }),
      headers: { "content-type": "application/x-protobuf", accept: "application/x-protobuf" },
    });
    const times = decodeProto("LeaseResponse", res.bytes).messages.map((m) => {
      const ts = m.event.attributes["time"]?.ce_timestamp;
      return [int64ToNumber(ts?.seconds), ts?.nanos ?? 0];
    });
    expect(times).toEqual([
      [-62135596800, 0],
      [-59011459201, 999999999],
      [-59011459200, 0],
      [253402300799, 999999999],
    ]);
  });
});

describe("RFC 3339 fractions of any length", () => {
  // RFC 3339's time-secfrac is "." 1*DIGIT, with no bound; a time is kept to nanoseconds, as a
  // protobuf Timestamp holds it, so the digits past the ninth are dropped (rounding down).
  it("a fraction past nanoseconds is read, and kept to nanoseconds", () => {
    expect(parseRfc3339("2026-01-01T00:00:00.1234567891Z")).toEqual({ seconds: 1767225600, nanos: 123456789 });
    expect(parseRfc3339("2026-01-01T00:00:00.99999999999999+01:00")).toEqual({ seconds: 1767222000, nanos: 999999999 });
  });

  it("an event's time with twelve fraction digits is taken and comes back to the nanosecond", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const sent = await h.call("POST", `${path}:send`, { body: { events: [event("t", 1, { time: "2026-01-01T00:00:00.123456789123Z" })] } });
    expect(sent.status).toBe(200);
    const leased = await h.call("POST", `${path}:lease`, { body: {} });
    expect(leased.json.messages[0].event.time).toBe("2026-01-01T00:00:00.123456789Z");
  });
});
