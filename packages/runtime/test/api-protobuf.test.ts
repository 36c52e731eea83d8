import { describe, expect, it } from "vitest";
import { decodeProto, encodeProto, int64ToNumber, type PbCloudEvent } from "../src/wire/proto-codec.ts";
import { apiHarness, event } from "./api-harness.ts";

const proto = { "content-type": "application/x-protobuf", accept: "application/x-protobuf" };

/** An event the way a CloudEvents SDK writes the protobuf format. */
function sdkEvent(id: string, json: unknown): PbCloudEvent {
  return {
    id,
    source: "/sdk",
    spec_version: "1.0",
    type: "com.example.sdk",
    attributes: {
      datacontenttype: { ce_string: "application/json" },
      time: { ce_timestamp: { seconds: 1767225600, nanos: 123456789 } },
      dataschema: { ce_uri: "https://example.com/schema" },
      partitionkey: { ce_string: "p1" },
      retries: { ce_integer: 3 },
      sampled: { ce_boolean: true },
      blob: { ce_bytes: new Uint8Array([1, 2]) },
    },
    text_data: JSON.stringify(json),
  };
}

describe("protobuf on send, lease, ack and nack", () => {
  it("a protobuf send stores the event exactly as its JSON twin would be seen", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const sent = await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events: [sdkEvent("p1", { total: 12.5 })] }), headers: proto });
    expect(sent.status).toBe(200);
    expect(sent.headers["content-type"]).toBe("application/x-protobuf");
    const ids = decodeProto("SendResponse", sent.bytes).message_ids;
    expect(ids).toHaveLength(1);
    const leased = await h.call("POST", `${path}:lease`, { body: {} });
    expect(leased.json.messages[0].id).toBe(ids[0]);
    expect(leased.json.messages[0].event).toEqual({
      specversion: "1.0",
      id: "p1",
      source: "/sdk",
      type: "com.example.sdk",
      datacontenttype: "application/json",
      dataschema: "https://example.com/schema",
      time: "2026-01-01T00:00:00.123456789Z",
      partitionkey: "p1",
      retries: 3,
      sampled: true,
      blob: "AQI=",
      data: { total: 12.5 },
    });
  });

  it("a protobuf lease carries ids, generations, counts, times and events; ack answers stale leases", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, {
      body: { events: [event("j", { a: 1 }), event("t", "plain", { datacontenttype: "text/plain" }), { ...event("b"), data: undefined, data_base64: "AAEC" }] },
    });
    const res = await h.call("POST", `${path}:lease`, { raw: encodeProto("LeaseRequest", { max_messages: 10, visibility_timeout: 10 }), headers: proto });
    expect(res.status).toBe(200);
    const { messages } = decodeProto("LeaseResponse", res.bytes);
    expect(messages).toHaveLength(3);
    const [j, t, b] = messages;
    expect(int64ToNumber(j!.lease_generation)).toBe(1);
    expect(j!.delivery_count).toBe(1);
    expect(int64ToNumber(j!.lease_expire_time.seconds)).toBe(Date.UTC(2026, 0, 1) / 1000 + 10);
    expect(j!.event.text_data).toBe('{"a":1}');
    // JSON data without a datacontenttype says what it is in protobuf, which has no default.
    expect(j!.event.attributes["datacontenttype"]?.ce_string).toBe("application/json");
    expect(t!.event.text_data).toBe("plain");
    expect([...b!.event.binary_data!]).toEqual([0, 1, 2]);

    h.clock.advance(10_000);
    const again = decodeProto("LeaseResponse", (await h.call("POST", `${path}:lease`, { raw: encodeProto("LeaseRequest", { max_messages: 1 }), headers: proto })).bytes);
    expect(again.messages[0]!.id).toBe(j!.id);
    const acked = await h.call("POST", `${path}:ack`, {
      raw: encodeProto("AckRequest", { messages: [{ id: j!.id, lease_generation: 1 }, { id: again.messages[0]!.id, lease_generation: 2 }] }),
      headers: proto,
    });
    const settled = decodeProto("SettleResponse", acked.bytes);
    expect(settled.acked).toBe(1);
    expect(settled.stale_leases.map((r) => [r.id, int64ToNumber(r.lease_generation)])).toEqual([[j!.id, 1]]);
  });

  it("nack in protobuf, with a per-message delay and a call delay", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("a"), event("b")] } });
    const [a, b] = (await h.call("POST", `${path}:lease`, { body: { max_messages: 2 } })).json.messages;
    const res = await h.call("POST", `${path}:nack`, {
      raw: encodeProto("NackRequest", { messages: [{ id: a.id, lease_generation: a.lease_generation, delay: 60 }, { id: b.id, lease_generation: b.lease_generation }], delay: 10 }),
      headers: proto,
    });
    expect(decodeProto("SettleResponse", res.bytes)).toMatchObject({ retried: 2 });
    h.clock.advance(10_000);
    expect((await h.call("POST", `${path}:lease`, { body: { max_messages: 2 } })).json.messages.map((m: { event: { id: string } }) => m.event.id)).toEqual(["b"]);
  });

  it("each data field of the envelope: text_data and binary_data are kept, proto_data is refused, not dropped", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const base = { id: "d", source: "/sdk", spec_version: "1.0", type: "t", attributes: {} };
    const bytes = new Uint8Array([0x08, 0x96, 0x01]);
    const events = [
      { ...base, id: "text", text_data: "plain", attributes: { datacontenttype: { ce_string: "text/plain" } } },
      { ...base, id: "binary", binary_data: bytes, attributes: { datacontenttype: { ce_string: "application/protobuf" } } },
    ];
    const kept = await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events }), headers: proto });
    expect(kept.status).toBe(200);
    const leased = await h.call("POST", `${path}:lease`, { raw: encodeProto("LeaseRequest", { max_messages: 10 }), headers: proto });
    const got = decodeProto("LeaseResponse", leased.bytes).messages.map((m) => m.event);
    expect(got.map((e) => [e.id, e.data, e.data === "binary_data" ? [...e.binary_data!] : e.text_data])).toEqual([
      ["text", "text_data", "plain"],
      ["binary", "binary_data", [...bytes]],
    ]);

    // The Go CloudEvents SDK puts protobuf payloads in proto_data (a google.protobuf.Any).
    const any = { ...base, id: "any", proto_data: { type_url: "type.googleapis.com/shop.Order", value: bytes } };
    const refused = await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events: [events[0]!, any] }), headers: proto });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({
      code: "invalid_argument",
      field: "events[1].proto_data",
      message: "events[1].proto_data is not accepted: send the payload as binary_data, with its datacontenttype",
    });
    // Nothing of the refused call was stored.
    const after = await h.call("POST", `${path}:lease`, { body: { max_messages: 10 } });
    expect(after.json.messages).toEqual([]);
  });

  it("refusals answer JSON; Accept picks the answer's format", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const empty = await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events: [] }), headers: proto });
    expect(empty.status).toBe(400);
    expect(empty.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(empty.json.error).toMatchObject({ code: "out_of_range", field: "events" });

    const garbage = await h.call("POST", `${path}:send`, { raw: new Uint8Array([0x0a, 0xff, 0xff, 0xff]), headers: proto });
    expect(garbage.json.error).toEqual({ code: "malformed_body", message: "the request body is not a valid protobuf SendRequest message" });

    const notJson = { ...sdkEvent("x", 1), text_data: "{not json" };
    const bad = await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events: [notJson] }), headers: proto });
    expect(bad.json.error).toMatchObject({ code: "malformed_body", field: "events[0].text_data" });

    const reserved = { ...sdkEvent("x", 1), attributes: { id: { ce_string: "again" } } };
    const clash = await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events: [reserved] }), headers: proto });
    expect(clash.json.error).toMatchObject({ code: "invalid_argument", field: "events[0].attributes.id" });

    // Beyond google.protobuf.Timestamp's range, 0001 to 9999, RFC 3339 cannot write it (it was a 500).
    for (const seconds of [1e15, -62_135_596_801]) {
      const far = { ...sdkEvent("x", 1), attributes: { time: { ce_timestamp: { seconds, nanos: 0 } } } };
      const refused = await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events: [far] }), headers: proto });
      expect(refused.status).toBe(400);
      expect(refused.json.error).toMatchObject({ code: "invalid_argument", field: "events[0].attributes.time", bound: "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z" });
    }
    const edge = { ...sdkEvent("x", 1), attributes: { time: { ce_timestamp: { seconds: 253_402_300_799, nanos: 999_999_999 } } } };
    await h.createQueue("edge");
    expect((await h.call("POST", `${h.queuePath("edge")}:send`, { raw: encodeProto("SendRequest", { events: [edge] }), headers: proto })).status).toBe(200);

    const noSpec = { ...sdkEvent("x", 1), spec_version: "" };
    expect((await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events: [noSpec] }), headers: proto })).json.error).toMatchObject({
      field: "events[0].specversion",
    });

    const delayedAck = await h.call("POST", `${path}:ack`, {
      raw: encodeProto("AckRequest", { messages: [{ id: "01KDVDNA000000000000000000", lease_generation: 1, delay: 5 }] }),
      headers: proto,
    });
    expect(delayedAck.json.error).toMatchObject({ code: "unknown_field", field: "messages[0].delay" });

    const tooMany = await h.call("POST", `${path}:lease`, { raw: encodeProto("LeaseRequest", { max_messages: 101 }), headers: proto });
    expect(tooMany.json.error).toMatchObject({ code: "out_of_range", field: "max_messages", bound: "1 to 100" });

    const jsonAnswer = await h.call("POST", `${path}:send`, {
      raw: encodeProto("SendRequest", { events: [sdkEvent("y", 2)] }),
      headers: { "content-type": "application/x-protobuf", accept: "application/json" },
    });
    expect(jsonAnswer.json.message_ids).toHaveLength(1);
    const protoAnswer = await h.call("POST", `${path}:lease`, { body: {}, headers: { accept: "application/x-protobuf" } });
    expect(decodeProto("LeaseResponse", protoAnswer.bytes).messages).toHaveLength(1);
  });
});
