/**
 * Bounds on how many items a body holds are checked before the body is built: a 1 MB protobuf
 * send of 500,000 empty events, or a JSON event of 60,000 members, took 0.4 to 0.8 s of the event
 * loop to decode before its bound refused it. The work is counted here, not timed.
 */
import protobuf from "protobufjs";
import { describe, expect, it, vi } from "vitest";
import { limits } from "@celld/queue-cell";
import { apiLimits } from "../src/api/index.ts";
import { checkJsonShape } from "../src/api/json-body.ts";
import { readProtoBounds } from "../src/api/proto-bounds.ts";
import { decodeProto, encodeProto, type PbCloudEvent } from "../src/wire/proto-codec.ts";
import { apiHarness, event } from "./api-harness.ts";

const proto = { "content-type": "application/x-protobuf" };

function pbEvent(id: string, extensions = 0): PbCloudEvent {
  const attributes: PbCloudEvent["attributes"] = {};
  for (let i = 0; i < extensions; i++) attributes[`x${i}`] = { ce_string: "v" };
  return { id, source: "/pb", spec_version: "1.0", type: "t", attributes, text_data: "x" };
}

/** 500,000 empty events: each is the two bytes 0x0a 0x00. */
/** Calls the server makes to protobufjs's decoder while `run` goes; refusals before decoding make none. */
async function decodes(run: () => Promise<void>): Promise<number> {
  const create = vi.spyOn(protobuf.Reader, "create");
  try {
    await run();
    return create.mock.calls.length;
  } finally {
    create.mockRestore();
  }
}

function manyEmptyEvents(count: number): Uint8Array {
  const bytes = new Uint8Array(count * 2);
  for (let i = 0; i < count; i++) bytes[i * 2] = 0x0a;
  return bytes;
}

describe("protobuf: a repeated field is counted on the wire, and reading stops one past its bound", () => {
  it("500,000 empty events: refused after reading 101 of them, naming events and its bound", async () => {
    const body = manyEmptyEvents(500_000);
    expect(body.byteLength).toBeLessThanOrEqual(apiLimits.sendBodyBytesMax);
    const past = readProtoBounds("SendRequest", body);
    expect(past.fieldsRead).toBe(limits.batchMessagesMax + 1);
    expect(past.refusal?.message).toBe(`events must hold 1 to ${limits.batchMessagesMax} events, got more than ${limits.batchMessagesMax}`);
    // At the bound every field is read and none refused: 100 events and a delay.
    const at = readProtoBounds("SendRequest", new Uint8Array([...manyEmptyEvents(limits.batchMessagesMax), 0x10, 0x05]));
    expect(at).toEqual({ refusal: undefined, fieldsRead: limits.batchMessagesMax + 1 });

    const h = await apiHarness();
    await h.createQueue("jobs");
    let refused = { status: 0, json: undefined as unknown as { error: unknown } };
    expect(await decodes(async () => void (refused = await h.call("POST", `${h.queuePath("jobs")}:send`, { raw: body, headers: proto })))).toBe(0);
    expect(refused.status).toBe(400);
    // "got more than": the count stopped at the bound (decoded whole, it said "got 500000").
    expect(refused.json.error).toEqual({
      code: "out_of_range",
      message: `events must hold 1 to ${limits.batchMessagesMax} events, got more than ${limits.batchMessagesMax}`,
      field: "events",
      bound: `1 to ${limits.batchMessagesMax} events`,
    });
    expect((await h.call("GET", h.queuePath("jobs"))).json.counts.ready).toBe(0);
  });

  it("fields of other numbers, groups and unknown wire types are stepped over, not counted against the bound", () => {
    // A group (field 9, start 0x4b ... end 0x4c) holding a varint, then 100 events: at the bound.
    const group = [0x4b, 0x08, 0x01, 0x4c];
    expect(readProtoBounds("SendRequest", new Uint8Array([...group, ...manyEmptyEvents(limits.batchMessagesMax)]))).toEqual({
      refusal: undefined,
      fieldsRead: 3 + limits.batchMessagesMax,
    });
    // A group in front does not hide the events behind it.
    expect(readProtoBounds("SendRequest", new Uint8Array([...group, ...manyEmptyEvents(1_000)])).refusal?.field).toBe("events");
  });

  it("ack and nack references: refused one past 100, naming messages", async () => {
    const refs = (n: number) => Array.from({ length: n }, () => ({ id: "01JZZZZZZZZZZZZZZZZZZZZZZZ", lease_generation: 1 }));
    const past = readProtoBounds("AckRequest", encodeProto("AckRequest", { messages: refs(1_000) }));
    // 101 references, and the id and generation of each of the first 100.
    expect(past.fieldsRead).toBe(limits.leaseMessagesMax + 1 + limits.leaseMessagesMax * 2);
    expect(past.refusal?.message).toBe(`messages must hold 1 to ${limits.leaseMessagesMax} messages, got more than ${limits.leaseMessagesMax}`);
    expect(readProtoBounds("NackRequest", encodeProto("NackRequest", { messages: refs(limits.leaseMessagesMax) }))).toEqual({
      refusal: undefined,
      fieldsRead: limits.leaseMessagesMax * 3,
    });
    const h = await apiHarness();
    await h.createQueue("jobs");
    const refused = await h.call("POST", `${h.queuePath("jobs")}:nack`, {
      raw: encodeProto("NackRequest", { messages: refs(1_000) }),
      headers: proto,
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toEqual({
      code: "out_of_range",
      message: `messages must hold 1 to ${limits.leaseMessagesMax} messages, got more than ${limits.leaseMessagesMax}`,
      field: "messages",
      bound: `1 to ${limits.leaseMessagesMax} messages`,
    });
  });

  it("an event's attributes map: refused past the optional attributes and 32 extensions, naming the event", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const at = encodeProto("SendRequest", { events: [pbEvent("ok", apiLimits.eventExtensionsMax)] });
    expect((await h.call("POST", `${h.queuePath("jobs")}:send`, { raw: at, headers: proto })).status).toBe(200);
    const many = encodeProto("SendRequest", { events: [pbEvent("ok"), pbEvent("wide", 60_000)] });
    const read = readProtoBounds("SendRequest", many);
    // Both events' tags, the first's 5 fields, the second's 4 before its map, 37 entries of it and
    // the key, value and value's one field of the 36 it walked.
    expect(read.fieldsRead).toBe(2 + 5 + 4 + (apiLimits.eventExtensionsMax + 5) + (apiLimits.eventExtensionsMax + 4) * 3);
    expect(read.refusal?.field).toBe("events[1]");
    let refused = { status: 0, json: undefined as unknown as { error: unknown } };
    expect(await decodes(async () => void (refused = await h.call("POST", `${h.queuePath("jobs")}:send`, { raw: many, headers: proto })))).toBe(0);
    expect(refused.status).toBe(400);
    expect(refused.json.error).toEqual({
      code: "out_of_range",
      message: `events[1] has more than ${apiLimits.eventExtensionsMax} extension attributes`,
      field: "events[1]",
      bound: `at most ${apiLimits.eventExtensionsMax} extension attributes`,
    });
  });

  it("a field that runs past the end of its message is refused in the decoder's words, before decoding, so no count can hide behind one", async () => {
    // The first event (2 bytes) holds a text_data of 3 bytes, past the event's end; were it read
    // on from there, the 500 events after it would be inside an unknown field 15 of 1,000 bytes.
    const body = new Uint8Array([0x0a, 0x02, 0x3a, 0x03, 0x7a, 0xe8, 0x07, ...manyEmptyEvents(500)]);
    expect(() => decodeProto("SendRequest", body)).toThrow();
    const read = readProtoBounds("SendRequest", body);
    expect(read.refusal?.code).toBe("malformed_body");
    expect(read.fieldsRead).toBe(2);

    const h = await apiHarness();
    await h.createQueue("jobs");
    let refused = { status: 0, json: undefined as unknown as { error: unknown } };
    expect(await decodes(async () => void (refused = await h.call("POST", `${h.queuePath("jobs")}:send`, { raw: body, headers: proto })))).toBe(0);
    expect(refused.status).toBe(400);
    expect(refused.json.error).toEqual({ code: "malformed_body", message: "the request body is not a valid protobuf SendRequest message" });
    const truncated = await h.call("POST", `${h.queuePath("jobs")}:send`, { raw: new Uint8Array([0x0a, 0x05, 0x01]), headers: proto });
    expect(truncated.json.error).toEqual({ code: "malformed_body", message: "the request body is not a valid protobuf SendRequest message" });
  });
});

describe("JSON: members of one object are bounded, in the pass before the body is parsed", () => {
  const bounds = { depthMax: apiLimits.jsonDepthMax, arrayItemsMax: apiLimits.jsonArrayItemsMax, objectMembersMax: apiLimits.jsonObjectMembersMax };

  it("is 10,000, as many as an array's items", () => {
    expect(apiLimits.jsonObjectMembersMax).toBe(10_000);
  });

  it("an event of 60,000 extension names is refused before JSON.parse, naming the event and the bound", async () => {
    const wide: Record<string, unknown> = {};
    for (let i = 0; i < 60_000; i++) wide[`x${i}`] = 0;
    const text = JSON.stringify({ events: [event("ok"), { ...event("wide"), ...wide }] });
    expect(() => checkJsonShape(text, bounds)).toThrow(`the JSON object at events[1] has more than ${apiLimits.jsonObjectMembersMax} members`);

    const h = await apiHarness();
    await h.createQueue("jobs");
    const parse = vi.spyOn(JSON, "parse");
    const refused = await h.call("POST", `${h.queuePath("jobs")}:send`, { raw: text, headers: { "content-type": "application/json" } });
    const parsedBody = parse.mock.calls.some(([arg]) => typeof arg === "string" && arg.length > 100_000);
    parse.mockRestore();
    expect(refused.status).toBe(400);
    expect(refused.json.error).toEqual({
      code: "out_of_range",
      message: `the JSON object at events[1] has more than ${apiLimits.jsonObjectMembersMax} members`,
      field: "events[1]",
      bound: `at most ${apiLimits.jsonObjectMembersMax} members`,
    });
    expect(parsedBody).toBe(false);
  });

  it("data as a large object is taken up to the bound; the members of nested objects count apart", () => {
    const object = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, { a: 1, b: [1, { c: 2 }] }]));
    expect(() => checkJsonShape(JSON.stringify({ data: object(apiLimits.jsonObjectMembersMax) }), bounds)).not.toThrow();
    expect(() => checkJsonShape(JSON.stringify({ data: object(apiLimits.jsonObjectMembersMax + 1) }), bounds)).toThrow(
      `the JSON object at data has more than ${apiLimits.jsonObjectMembersMax} members`,
    );
    expect(() => checkJsonShape(JSON.stringify(object(apiLimits.jsonObjectMembersMax + 1)), bounds)).toThrow(
      `the JSON object at the top level has more than ${apiLimits.jsonObjectMembersMax} members`,
    );
    // Keys that are strings with escapes and members that are strings are told apart.
    expect(() => checkJsonShape(JSON.stringify({ "a\"b": "x,\"y\":1", c: ["d", "e"] }), { ...bounds, objectMembersMax: 2 })).not.toThrow();
    expect(() => checkJsonShape(JSON.stringify({ "a\"b": "x", c: 1, d: 2 }), { ...bounds, objectMembersMax: 2 })).toThrow("has more than 2 members");
  });
});
