import { gzipSync } from "node:zlib";
import { request } from "undici";
import { describe, expect, it } from "vitest";
import { limits } from "@celld/queue-cell";
import { apiLimits } from "../src/api/api-limits.ts";
import { apiHarness, event, testEnv, type CallResult } from "./api-harness.ts";

/**
 * CloudEvents' own HTTP binding on :send and events:publish: structured mode, batched mode and
 * binary mode (the CloudEvents SDKs' default), beside the API's envelope.
 */
type Harness = Awaited<ReturnType<typeof apiHarness>>;

const structured = { "content-type": "application/cloudevents+json; charset=utf-8" };
const batch = { "content-type": "application/cloudevents-batch+json" };
const ce = { "ce-specversion": "1.0", "ce-id": "b-1", "ce-source": "/go/sdk", "ce-type": "com.example.binary" };

async function harnessWithQueue(): Promise<Harness & { path: string }> {
  const h = await apiHarness();
  await h.createQueue("jobs");
  return Object.assign(h, { path: h.queuePath("jobs") });
}

async function leaseText(h: Harness, path: string): Promise<string> {
  const res = await h.call("POST", `${path}:lease`, { body: { max_messages: 100 } });
  expect(res.status).toBe(200);
  return Buffer.from(res.bytes).toString("utf8");
}

const leasedEvents = (text: string): Array<Record<string, unknown>> =>
  (JSON.parse(text) as { messages: Array<{ event: Record<string, unknown> }> }).messages.map((m) => m.event);

describe("structured and batched mode", () => {
  it("application/cloudevents+json: the body is one event, its data kept as written", async () => {
    const h = await harnessWithQueue();
    const body = '{"specversion":"1.0","id":"s-1","source":"/sdk","type":"com.example.structured","subject":"x","data":{"id":12345678901234567891}}';
    const sent = await h.call("POST", `${h.path}:send`, { raw: body, headers: structured });
    expect(sent.status).toBe(200);
    expect(sent.json.message_ids).toHaveLength(1);
    expect(await leaseText(h, h.path)).toContain(`"event":${body}}`);
  });

  it("application/cloudevents-batch+json: the body is an array of events, in order", async () => {
    const h = await harnessWithQueue();
    const events = [event("b1", { n: 1 }), event("b2", "plain", { datacontenttype: "text/plain" }), { ...event("b3"), data: undefined, data_base64: "AAEC" }];
    const sent = await h.call("POST", `${h.path}:send`, { raw: JSON.stringify(events), headers: batch });
    expect(sent.status).toBe(200);
    expect(sent.json.message_ids).toHaveLength(3);
    expect(leasedEvents(await leaseText(h, h.path))).toEqual(events.map((e) => JSON.parse(JSON.stringify(e))));
  });

  it("events:publish takes both, and binary mode, as :send does", async () => {
    const h = await harnessWithQueue();
    await h.call("POST", `/v1/${testEnv}/subscriptions`, { body: { name: "all", queue: "jobs" } });
    const publish = `/v1/${testEnv}/events:publish`;
    expect((await h.call("POST", publish, { raw: JSON.stringify(event("p1")), headers: structured })).status).toBe(200);
    expect((await h.call("POST", publish, { raw: JSON.stringify([event("p2"), event("p3")]), headers: batch })).status).toBe(200);
    const binary = await h.call("POST", publish, { raw: "1.0", headers: { ...ce, "ce-id": "p4", "content-type": "application/json" } });
    expect(binary.status).toBe(200);
    expect(binary.json.events[0].deliveries).toHaveLength(1);
    const leased = leasedEvents(await leaseText(h, h.path));
    expect(leased.map((e) => e["id"])).toEqual(["p1", "p2", "p3", "p4"]);
  });

  it("refusals name the field in the body, or the body", async () => {
    const h = await harnessWithQueue();
    const cases: Array<[string, Record<string, string>, string, string, string | undefined]> = [
      // [name, headers, body, code, field]
      ["structured id missing", structured, JSON.stringify({ specversion: "1.0", source: "/s", type: "t" }), "invalid_argument", "id"],
      ["structured body an array", structured, JSON.stringify([event("a")]), "invalid_argument", undefined],
      ["structured with both data kinds", structured, JSON.stringify({ ...event("a"), data_base64: "AA==" }), "invalid_argument", "data_base64"],
      ["structured text data not a string", structured, JSON.stringify(event("a", { x: 1 }, { datacontenttype: "text/plain" })), "invalid_argument", "data"],
      ["batch not an array", batch, JSON.stringify(event("a")), "invalid_argument", undefined],
      ["batch empty", batch, "[]", "out_of_range", undefined],
      ["batch with a bad event", batch, JSON.stringify([event("a"), event("b", 1, { type: "" })]), "out_of_range", "[1].type"],
      ["batch not JSON", batch, "[{", "malformed_body", undefined],
    ];
    for (const [name, headers, body, code, field] of cases) {
      const res = await h.call("POST", `${h.path}:send`, { raw: body, headers });
      expect(res.status, name).toBe(400);
      expect(res.json.error.code, name).toBe(code);
      expect(res.json.error.field, name).toBe(field);
    }
    const structuredMessage = await h.call("POST", `${h.path}:send`, { raw: JSON.stringify([event("a")]), headers: structured });
    expect(structuredMessage.json.error.message).toBe("the request body must be a JSON object, got an array");
    const empty = await h.call("POST", `${h.path}:send`, { raw: "[]", headers: batch });
    expect(empty.json.error).toEqual({
      code: "out_of_range",
      message: "a application/cloudevents-batch+json body must hold 1 to 100 events, got 0",
      bound: "1 to 100 events",
    });
    expect((await h.call("GET", h.path)).json.counts.ready).toBe(0);
  });
});

describe("extension names past 20 characters", () => {
  // The spec says a name SHOULD NOT exceed 20 characters, not MUST; the JavaScript SDK never
  // checks it and Go's no longer does by default, so such events reach celld from real producers.
  it("are taken in the envelope, structured, batched and binary mode, and come back unchanged", async () => {
    const h = await harnessWithQueue();
    const name = "comexampleextensionlonger"; // 25 characters
    const json = event("x", 1, { [name]: "v" });
    const sends = [
      await h.call("POST", `${h.path}:send`, { body: { events: [json] } }),
      await h.call("POST", `${h.path}:send`, { raw: JSON.stringify(json), headers: structured }),
      await h.call("POST", `${h.path}:send`, { raw: JSON.stringify([json]), headers: batch }),
      await h.call("POST", `${h.path}:send`, { raw: "", headers: { ...ce, [`ce-${name}`]: "v" } }),
    ];
    expect(sends.map((res) => res.status)).toEqual([200, 200, 200, 200]);
    expect(leasedEvents(await leaseText(h, h.path)).map((e) => e[name])).toEqual(["v", "v", "v", "v"]);
  });
});

describe("binary mode", () => {
  it("attributes from ce- headers, percent-decoded; JSON data from the body, kept as written", async () => {
    const h = await harnessWithQueue();
    const sent = await h.call("POST", `${h.path}:send`, {
      raw: '{ "id" : 12345678901234567891,\n  "note": "a  b" }\n',
      headers: {
        ...ce,
        "ce-time": "2026-01-01T01:00:00+01:00",
        "ce-subject": "Euro%20%e2%82%ac%20%F0%9F%98%80",
        "ce-partitionkey": '"quoted \\"value\\""',
        "ce-traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "content-type": "application/json; charset=utf-8",
      },
    });
    expect(sent.status).toBe(200);
    const text = await leaseText(h, h.path);
    expect(leasedEvents(text)).toEqual([
      {
        specversion: "1.0",
        id: "b-1",
        source: "/go/sdk",
        type: "com.example.binary",
        datacontenttype: "application/json; charset=utf-8",
        subject: "Euro € 😀",
        time: "2026-01-01T00:00:00Z",
        partitionkey: 'quoted "value"',
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        data: { id: 12345678901234567891, note: "a  b" },
      },
    ]);
    expect(text).toContain('"data":{"id":12345678901234567891,"note":"a  b"}}');
  });

  it("text is text, other types are bytes, no body is no data", async () => {
    const h = await harnessWithQueue();
    const send = (id: string, raw: Uint8Array | string, contentType?: string) =>
      h.call("POST", `${h.path}:send`, { raw, headers: { ...ce, "ce-id": id, ...(contentType === undefined ? {} : { "content-type": contentType }) } });
    expect((await send("text", "\ufeffgift wrap é", "text/plain")).status).toBe(200);
    expect((await send("latin1", new Uint8Array([0x63, 0x61, 0x66, 0xe9]), "text/plain; charset=iso-8859-1")).status).toBe(200);
    expect((await send("pdf", new Uint8Array([0x25, 0x50, 0x44, 0x46, 0xff]), "application/pdf")).status).toBe(200);
    expect((await send("untyped", new Uint8Array([1, 2, 3]))).status).toBe(200);
    expect((await send("empty", "", "application/json")).status).toBe(200);
    const attrs = (id: string) => ({ specversion: "1.0", id, source: "/go/sdk", type: "com.example.binary" });
    expect(leasedEvents(await leaseText(h, h.path))).toEqual([
      { ...attrs("text"), datacontenttype: "text/plain", data: "\ufeffgift wrap é" },
      { ...attrs("latin1"), datacontenttype: "text/plain; charset=iso-8859-1", data_base64: Buffer.from([0x63, 0x61, 0x66, 0xe9]).toString("base64") },
      { ...attrs("pdf"), datacontenttype: "application/pdf", data_base64: "JVBERv8=" },
      { ...attrs("untyped"), data_base64: "AQID" },
      { ...attrs("empty"), datacontenttype: "application/json" },
    ]);
  });

  it("refusals name the header", async () => {
    const h = await harnessWithQueue();
    const json = { "content-type": "application/json" };
    const cases: Array<[string, Record<string, string>, string, string, string | undefined]> = [
      // [name, headers, body, code, field]
      ["ce-id missing", { ...ce, "ce-id": "", ...json }, "{}", "out_of_range", "ce-id"],
      ["ce-type missing", { "ce-specversion": "1.0", "ce-id": "a", "ce-source": "/s", ...json }, "{}", "invalid_argument", "ce-type"],
      // The other required attributes as headers make it binary mode, whatever the body looks like:
      // a forgotten ce-specversion is named, not read as an envelope with an unknown field.
      ["ce-specversion missing, JSON data", { "ce-id": "a", "ce-source": "/s", "ce-type": "t", ...json }, '{"order":1}', "invalid_argument", "ce-specversion"],
      ["ce-specversion missing, text data", { "ce-id": "a", "ce-source": "/s", "ce-type": "t", "content-type": "text/plain" }, "hi", "invalid_argument", "ce-specversion"],
      ["ce-specversion wrong", { ...ce, "ce-specversion": "0.3", ...json }, "{}", "invalid_argument", "ce-specversion"],
      ["ce-source with a space", { ...ce, "ce-source": "not%20a%20uri", ...json }, "{}", "invalid_argument", "ce-source"],
      ["ce-time not a time", { ...ce, "ce-time": "yesterday", ...json }, "{}", "invalid_argument", "ce-time"],
      ["ce-datacontenttype sent", { ...ce, "ce-datacontenttype": "application/json", ...json }, "{}", "invalid_argument", "ce-datacontenttype"],
      ["extension named with a dash", { ...ce, "ce-my-ext": "x", ...json }, "{}", "unknown_field", "ce-my-ext"],
      ["a % without hex digits", { ...ce, "ce-subject": "100%", ...json }, "{}", "invalid_argument", "ce-subject"],
      ["percent-encoded bytes that are not UTF-8", { ...ce, "ce-subject": "%C0%A0", ...json }, "{}", "invalid_argument", "ce-subject"],
      ["Content-Type not a media type", { ...ce, "content-type": "json" }, "{}", "invalid_argument", "Content-Type"],
      ["JSON data that is not JSON", { ...ce, ...json }, "{", "malformed_body", undefined],
      ["JSON data too deep", { ...ce, ...json }, "[".repeat(40) + "]".repeat(40), "out_of_range", "[0]".repeat(32)],
      ["text data that is not UTF-8", { ...ce, "content-type": "text/plain" }, "\u00ff", "malformed_body", undefined],
    ];
    for (const [name, headers, body, code, field] of cases) {
      const raw = name === "text data that is not UTF-8" ? new Uint8Array([0x61, 0xff]) : body;
      const res = await h.call("POST", `${h.path}:send`, { raw, headers });
      expect(res.status, name).toBe(400);
      expect(res.json.error.code, name).toBe(code);
      expect(res.json.error.field, name).toBe(field);
    }
    const missing = await h.call("POST", `${h.path}:send`, { raw: "{}", headers: { "ce-specversion": "1.0", "ce-id": "a", "ce-source": "/s", ...json } });
    expect(missing.json.error.message).toBe("ce-type is required");

    // The body was read as JSON only because of its Content-Type: the refusal says which it was.
    const notJson = await h.call("POST", `${h.path}:send`, { raw: '{"a":1,}', headers: { ...ce, "content-type": "application/vnd.acme+json; v=2" } });
    expect(notJson.json.error.message).toBe(
      'the request body is not valid JSON, which its Content-Type "application/vnd.acme+json" says it is (in binary mode the body is the event\'s data)',
    );
    const percent = await h.call("POST", `${h.path}:send`, { raw: "{}", headers: { ...ce, "ce-subject": "100%", ...json } });
    expect(percent.json.error.message).toBe("ce-subject has a % not followed by two hex digits: percent-encode a literal % as %25");

    // An attribute sent twice: Node would join the values with ", ".
    const twice = await request(`${h.server.url}${h.path}:send`, {
      method: "POST",
      headers: ["authorization", `Bearer ${h.defaultKey}`, "ce-specversion", "1.0", "ce-id", "a", "ce-id", "b", "ce-source", "/s", "ce-type", "t"],
      body: "",
    });
    expect(twice.statusCode).toBe(400);
    expect(await twice.body.json()).toEqual({
      error: { code: "invalid_argument", message: "ce-id is sent 2 times; an attribute has one value", field: "ce-id", bound: "one header" },
    });
    expect((await h.call("GET", h.path)).json.counts.ready).toBe(0);
  });
});

describe("the bounds of the envelope hold in every mode", () => {
  const attributes = (id: string, contentType: string) =>
    Buffer.byteLength(JSON.stringify({ specversion: "1.0", id, source: "/go/sdk", type: "com.example.binary", datacontenttype: contentType }));
  /** A text event of exactly `bytes` bytes as the cell counts them, for the JSON modes. */
  const sized = (id: string, bytes: number) => {
    const head = { specversion: "1.0", id, source: "/tests", type: "test.event", datacontenttype: "text/plain" };
    return { ...head, data: "x".repeat(bytes - Buffer.byteLength(JSON.stringify(head))) };
  };
  const cases: Array<{ name: string; send: (h: Harness, path: string, over: number) => Promise<CallResult>; code: string; field?: string }> = [
    {
      name: "message bytes, binary mode",
      send: (h, path, over) =>
        h.call("POST", `${path}:send`, {
          raw: new Uint8Array(limits.messageBytesMax - attributes("b-1", "application/octet-stream") + over),
          headers: { ...ce, "content-type": "application/octet-stream" },
        }),
      code: "message_too_large",
    },
    {
      name: "message bytes, structured mode",
      send: (h, path, over) => h.call("POST", `${path}:send`, { raw: JSON.stringify(sized("s", limits.messageBytesMax + over)), headers: structured }),
      code: "message_too_large",
    },
    {
      name: "message bytes, batched mode",
      send: (h, path, over) => h.call("POST", `${path}:send`, { raw: JSON.stringify([event("a"), sized("s", limits.messageBytesMax + over)]), headers: batch }),
      code: "message_too_large",
      field: "[1]",
    },
    {
      name: "batch bytes, batched mode",
      send: (h, path, over) => {
        const rest = limits.batchBytesMax - limits.messageBytesMax - 1000;
        const events = [sized("a", limits.messageBytesMax), sized("b", rest), sized("c", 1000 + over)];
        return h.call("POST", `${path}:send`, { raw: JSON.stringify(events), headers: batch });
      },
      code: "batch_too_large",
    },
    {
      name: "events per call, batched mode",
      send: (h, path, over) =>
        h.call("POST", `${path}:send`, { raw: JSON.stringify(Array.from({ length: limits.batchMessagesMax + over }, (_, i) => event(`e${i}`))), headers: batch }),
      code: "out_of_range",
    },
  ];
  for (const c of cases) {
    it(`${c.name}: accepted at the bound, refused one past it`, async () => {
      const h = await harnessWithQueue();
      const past = await c.send(h, h.path, 1);
      expect(past.status).toBe(400);
      expect(past.json.error).toMatchObject({ code: c.code, bound: expect.any(String) });
      expect(past.json.error.field).toBe(c.field);
      expect((await h.call("GET", h.path)).json.counts.ready).toBe(0);
      expect((await c.send(h, h.path, 0)).status).toBe(200);
    });
  }
});

describe("the header bound, which binary mode's attributes share", () => {
  const bigEvent = (subjectChars: number): Record<string, string> => ({
    ...ce,
    "ce-subject": "s".repeat(subjectChars),
    "content-type": "text/plain",
  });

  it("headers past it are 431 with a JSON error naming the bound, not a bare status", async () => {
    const h = await harnessWithQueue();
    const res = await h.call("POST", `${h.path}:send`, { raw: "x", headers: bigEvent(apiLimits.headerBytesMax) });
    expect(res.status).toBe(431);
    expect(res.headers["connection"]).toBe("close");
    expect(res.json.error).toEqual({
      code: "headers_too_large",
      message: `the request headers are over ${apiLimits.headerBytesMax} bytes together; a binary-mode CloudEvent carries its attributes in them: send a larger one in structured mode (application/cloudevents+json)`,
      bound: `at most ${apiLimits.headerBytesMax} bytes of headers`,
    });
    expect((await h.call("GET", h.path)).json.counts.ready).toBe(0);
  });

  it("headers within it are read", async () => {
    const h = await harnessWithQueue();
    const res = await h.call("POST", `${h.path}:send`, { raw: "x", headers: bigEvent(apiLimits.eventAttributeCharsMax) });
    expect(res.status).toBe(200);
  });
});

describe("media types that are not taken", () => {
  it("another event format, or a CloudEvent where no route takes one: 415 naming what is taken", async () => {
    const h = await harnessWithQueue();
    const avro = await h.call("POST", `${h.path}:send`, { raw: "x", headers: { "content-type": "application/cloudevents+avro" } });
    expect(avro.status).toBe(415);
    expect(avro.json.error).toEqual({
      code: "unsupported_media_type",
      message:
        "this route takes application/json, application/x-protobuf, application/cloudevents+json or application/cloudevents-batch+json, or a binary-mode CloudEvent (ce-specversion and the other attributes as ce- headers), not application/cloudevents+avro",
      field: "Content-Type",
      bound:
        "application/json, application/x-protobuf, application/cloudevents+json or application/cloudevents-batch+json, or a binary-mode CloudEvent (ce-specversion and the other attributes as ce- headers)",
    });
    const xml = await h.call("POST", `/v1/${testEnv}/events:publish`, { raw: "<x/>", headers: { "content-type": "application/xml" } });
    expect(xml.status).toBe(415);
    expect(xml.json.error.bound).toBe(
      "application/json, application/cloudevents+json or application/cloudevents-batch+json, or a binary-mode CloudEvent (ce-specversion and the other attributes as ce- headers)",
    );
    const lease = await h.call("POST", `${h.path}:lease`, { raw: JSON.stringify(event("a")), headers: structured });
    expect(lease.status).toBe(415);
    expect(lease.json.error.message).toBe("this route takes application/json or application/x-protobuf, not application/cloudevents+json; charset=utf-8");
    // A ce- header on a route that takes no CloudEvents is just a header.
    const leaseWithHeader = await h.call("POST", `${h.path}:lease`, { body: {}, headers: { "ce-specversion": "1.0" } });
    expect(leaseWithHeader.status).toBe(200);
  });

  it("a compressed body (Content-Encoding) is 415, not stored as its compressed bytes", async () => {
    const h = await harnessWithQueue();
    const gzip = (text: string) => new Uint8Array(gzipSync(text));
    const cases: Array<[string, string, Record<string, string>, Uint8Array]> = [
      ["binary mode", `${h.path}:send`, { ...ce, "content-type": "application/octet-stream" }, gzip("hello")],
      ["the envelope", `${h.path}:send`, { "content-type": "application/json" }, gzip(JSON.stringify({ events: [event("a")] }))],
      ["structured mode on events:publish", `/v1/${testEnv}/events:publish`, structured, gzip(JSON.stringify(event("a")))],
      ["an ack", `${h.path}:ack`, { "content-type": "application/json" }, gzip("{}")],
    ];
    for (const [name, path, headers, raw] of cases) {
      const res = await h.call("POST", path, { raw, headers: { ...headers, "content-encoding": "gzip" } });
      expect(res.status, name).toBe(415);
      expect(res.headers["accept-encoding"], name).toBe("identity");
      expect(res.json.error, name).toEqual({
        code: "unsupported_media_type",
        message: "the request body has Content-Encoding gzip; send it without a content coding (identity)",
        field: "Content-Encoding",
        bound: "identity",
      });
    }
    expect((await h.call("GET", h.path)).json.counts.ready).toBe(0);
    // identity is no coding at all.
    const plain = await h.call("POST", `${h.path}:send`, { raw: "hello", headers: { ...ce, "content-type": "text/plain", "content-encoding": "identity" } });
    expect(plain.status).toBe(200);
  });
});
