import { describe, expect, it } from "vitest";
import { batchDataTexts, envelopeDataTexts, eventDataText } from "../src/wire/json-source.ts";
import { decodeProto, encodeProto } from "../src/wire/proto-codec.ts";
import { apiHarness, testEnv } from "./api-harness.ts";

/**
 * JSON data as senders write it that JSON.parse cannot hold: Go's int64 and uint64, Python's
 * unbounded ints, decimals with more digits than a double. Each must come back from a lease
 * byte for byte (whitespace between tokens aside), whichever format carried it in or out.
 */
const exact: Array<[string, string]> = [
  ["a uint64 beyond 2^53", '{"id":12345678901234567891}'],
  ["uint64 max", "18446744073709551615"],
  ["int64 min", "-9223372036854775808"],
  ["a Python int", "123456789012345678901234567890123456789"],
  ["1.0 keeps its fraction", "1.0"],
  ["a decimal past a double's digits", "0.1000000000000000055511151231257827"],
  ["negative zero", "-0"],
  // JSON.parse reads it as Infinity, which JSON.stringify wrote as null: the sender's text is kept.
  ["a number past a double's range", "1e400"],
  ["nested", '{"a":[1,{"b":[12345678901234567891,{"c":-1E-400}]}],"d":{}}'],
  ["a string with brackets, quotes and escapes", '"{not [an] \\"object\\"} \\\\ \\/ \\u0041\\n"'],
  ["keys with quotes and braces", '{"k\\"}":"]","{":[{"}":"\\\\"}]}'],
  ["unicode, raw and escaped", '{"raw":"é 日本 😀","escaped":"\\u00e9 \\ud83d\\ude00"}'],
  ["literals", "[true,false,null]"],
  ["empty containers", '{"a":[],"b":{}}'],
];

const leaseText = async (h: Awaited<ReturnType<typeof apiHarness>>, path: string, n: number): Promise<string> => {
  const res = await h.call("POST", `${path}:lease`, { body: { max_messages: n } });
  expect(res.status).toBe(200);
  return Buffer.from(res.bytes).toString("utf8");
};

const rawEvent = (id: string, data: string, extra = ""): string =>
  `{"specversion":"1.0","id":"${id}","source":"/tests","type":"test.event"${extra},"data":${data}}`;

describe("JSON data comes back from a lease exactly as it was sent", () => {
  it("several events of one JSON send, each leased with its data as written", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const body = `{"events":[${exact.map(([, data], i) => rawEvent(`e${i}`, data)).join(",")}]}`;
    const sent = await h.call("POST", `${path}:send`, { raw: body, headers: { "content-type": "application/json" } });
    expect(sent.status).toBe(200);
    const text = await leaseText(h, path, 100);
    for (const [name, data] of exact) {
      const i = exact.findIndex(([n]) => n === name);
      expect(text, name).toContain(`"event":${rawEvent(`e${i}`, data)}}`);
    }
    // The whole answer is still JSON.
    expect(JSON.parse(text).messages).toHaveLength(exact.length);
  });

  it("whitespace between tokens is dropped, inside strings kept; duplicate keys inside data are kept as written", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const body = [
      '{ "delay" : 0 ,\n "events" : [\n',
      '  { "specversion":"1.0", "id":"a", "source":"/tests", "type":"test.event",\n',
      '    "data" : {\r\n\t"n" : [ 12345678901234567891 , "  spaced  { } " ], "k": 1, "k": 2 } } ,\n',
      '  {"specversion":"1.0","id":"b","source":"/tests","type":"test.event","d\\u0061ta" : 98765432109876543210 },\n',
      '  {"specversion":"1.0","id":"c","source":"/tests","type":"test.event"}\n',
      "] }",
    ].join("");
    expect((await h.call("POST", `${path}:send`, { raw: body, headers: { "content-type": "application/json" } })).status).toBe(200);
    const text = await leaseText(h, path, 3);
    expect(text).toContain(`"event":${rawEvent("a", '{"n":[12345678901234567891,"  spaced  { } "],"k":1,"k":2}')}}`);
    expect(text).toContain(`"event":${rawEvent("b", "98765432109876543210")}}`);
    expect(text).toContain('"event":{"specversion":"1.0","id":"c","source":"/tests","type":"test.event"}}');
  });

  it("a member given twice in an event or in the envelope is refused, naming it, in every JSON format", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const event = '{"specversion":"1.0","id":"a","source":"/tests","type":"test.event","id":"b"}';
    const escaped = '{"specversion":"1.0","id":"a","source":"/tests","type":"test.event","data":1,"d\\u0061ta":2}';
    const cases: Array<[string, string, string, string]> = [
      // [name, content type, body, field]
      ["envelope, id twice", "application/json", `{"events":[{"specversion":"1.0","id":"z","source":"/tests","type":"test.event"},${event}]}`, "events[1].id"],
      ["envelope, data twice, once escaped", "application/json", `{"events":[${escaped}]}`, "events[0].data"],
      ["envelope, events twice", "application/json", `{"events":[${rawEvent("x", "1")}],"events":[${rawEvent("y", "2")}]}`, "events"],
      ["structured", "application/cloudevents+json", event, "id"],
      ["batch", "application/cloudevents-batch+json", `[${event}]`, "[0].id"],
    ];
    for (const [name, type, raw, field] of cases) {
      const res = await h.call("POST", `${path}:send`, { raw, headers: { "content-type": type } });
      expect(res.status, name).toBe(400);
      expect(res.json.error, name).toEqual({
        code: "invalid_argument",
        message: `${field} is given twice; a member's name must be unique in its object`,
        field,
        bound: "one member of each name",
      });
    }
    const publish = await h.call("POST", `/v1/${testEnv}/events:publish`, { raw: `{"events":[${event}]}`, headers: { "content-type": "application/json" } });
    expect(publish.json.error?.field).toBe("events[0].id");
    expect((await h.call("GET", path)).json.counts.ready).toBe(0);
  });

  it("whitespace in data costs nothing: a spaced send stores as many bytes as a compact one", async () => {
    const h = await apiHarness();
    const json = { "content-type": "application/json" };
    await h.createQueue("spaced");
    await h.createQueue("compact");
    await h.call("POST", `${h.queuePath("spaced")}:send`, { raw: `{"events":[${rawEvent("a", '{ "id" :\n [ 1 , 2 ] }')}]}`, headers: json });
    await h.call("POST", `${h.queuePath("compact")}:send`, { raw: `{"events":[${rawEvent("a", '{"id":[1,2]}')}]}`, headers: json });
    const bytes = async (queue: string): Promise<number> => (await h.call("GET", h.queuePath(queue))).json.counts.backlog_bytes;
    expect(await bytes("spaced")).toBe(await bytes("compact"));
  });

  it("events:publish keeps each event's data as written too", async () => {
    const h = await apiHarness();
    await h.createQueue("orders");
    await h.call("POST", `/v1/${testEnv}/subscriptions`, { body: { name: "all", queue: "orders" } });
    const body = `{"events":[${rawEvent("p1", '{"id":12345678901234567891}')},${rawEvent("p2", "1.0")}]}`;
    const published = await h.call("POST", `/v1/${testEnv}/events:publish`, { raw: body, headers: { "content-type": "application/json" } });
    expect(published.status).toBe(200);
    const text = await leaseText(h, h.queuePath("orders"), 2);
    expect(text).toContain(`"event":${rawEvent("p1", '{"id":12345678901234567891}')}}`);
    expect(text).toContain(`"event":${rawEvent("p2", "1.0")}}`);
  });

  it("protobuf text_data with a JSON type, leased as JSON and as protobuf", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const proto = { "content-type": "application/x-protobuf" };
    const texts = ['{"id":12345678901234567891}', '{ "spaced" : 1.0 }', "-9223372036854775808"];
    const events = texts.map((text, i) => ({
      id: `p${i}`,
      source: "/sdk",
      spec_version: "1.0",
      type: "com.example.sdk",
      attributes: { datacontenttype: { ce_string: "application/json" } },
      text_data: text,
    }));
    expect((await h.call("POST", `${path}:send`, { raw: encodeProto("SendRequest", { events }), headers: proto })).status).toBe(200);
    const asJson = await leaseText(h, path, 3);
    texts.forEach((text, i) => {
      expect(asJson).toContain(
        `"event":{"specversion":"1.0","id":"p${i}","source":"/sdk","type":"com.example.sdk","datacontenttype":"application/json","data":${text}}}`,
      );
    });
    h.clock.advance(30_000);
    const again = await h.call("POST", `${path}:lease`, { raw: encodeProto("LeaseRequest", { max_messages: 3 }), headers: { ...proto, accept: "application/x-protobuf" } });
    expect(decodeProto("LeaseResponse", again.bytes).messages.map((m) => m.event.text_data)).toEqual(texts);
  });

  it("a dead letter shows its data as written", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 1 });
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { raw: `{"events":[${rawEvent("d", "[18446744073709551615,1.50]")}]}`, headers: { "content-type": "application/json" } });
    const [m] = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages;
    await h.call("POST", `${path}:nack`, { body: { messages: [{ id: m.id, lease_generation: m.lease_generation }] } });
    const list = await h.call("GET", `${path}/dead-letters`);
    expect(list.status).toBe(200);
    expect(Buffer.from(list.bytes).toString("utf8")).toContain(`"event":${rawEvent("d", "[18446744073709551615,1.50]")}}]}`);
  });
});

describe("which datacontenttype declares JSON data", () => {
  // The JSON format's rule: a subtype of json or one ending in +json, whatever the top-level type.
  it("*/json and */*+json do, parameters aside; a json-like name that is neither does not", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const json = ["application/json", "text/json", "model/json; charset=utf-8", "application/geo+json", "Example/JSON"];
    for (const [i, type] of json.entries()) {
      const res = await h.call("POST", `${path}:send`, { raw: `{"events":[${rawEvent(`j${i}`, '{"a":1}', `,"datacontenttype":"${type}"`)}]}` });
      expect(res.status, type).toBe(200);
    }
    for (const type of ["application/x-json", "application/jsonl", "application/json-seq"]) {
      const res = await h.call("POST", `${path}:send`, { raw: `{"events":[${rawEvent("n", '{"a":1}', `,"datacontenttype":"${type}"`)}]}` });
      expect(res.status, type).toBe(400);
      expect(res.json.error.field, type).toBe("events[0].data");
    }
  });
});

describe("text data comes back exactly as it was sent", () => {
  it("a leading byte-order mark included, in JSON and in protobuf", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const path = h.queuePath("jobs");
    const data = "\ufeffid,total\n1,12.50";
    await h.call("POST", `${path}:send`, { body: { events: [{ specversion: "1.0", id: "csv", source: "/tests", type: "test.event", datacontenttype: "text/csv", data }] } });
    const [m] = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages;
    expect(m.event.data).toBe(data);
    h.clock.advance(30_000);
    const proto = { "content-type": "application/x-protobuf", accept: "application/x-protobuf" };
    const again = await h.call("POST", `${path}:lease`, { raw: encodeProto("LeaseRequest", {}), headers: proto });
    expect(decodeProto("LeaseResponse", again.bytes).messages[0]!.event.text_data).toBe(data);
  });
});

describe("the JSON source scanner agrees with JSON.parse", () => {
  /** A small seeded generator (mulberry32), so a failure names a seed that replays it. */
  function random(seed: number): () => number {
    let a = seed;
    return () => {
      a = (a + 0x6d2b79f5) | 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const pieces = ['"', "\\", "{", "}", "[", "]", ",", ":", " ", "é", "😀", "data", "events", "\n"];

  function jsonText(rnd: () => number, depth: number): string {
    const ws = (): string => [" ", "", "\n\t", "", "\r\n "][Math.floor(rnd() * 5)]!;
    const pick = Math.floor(rnd() * (depth > 3 ? 4 : 6));
    if (pick === 0) return ["12345678901234567891", "-0", "1.0", "1e400", "0", "-2.5E-3"][Math.floor(rnd() * 6)]!;
    if (pick === 1) return ["true", "false", "null"][Math.floor(rnd() * 3)]!;
    if (pick <= 3) return JSON.stringify(Array.from({ length: Math.floor(rnd() * 6) }, () => pieces[Math.floor(rnd() * pieces.length)]).join(""));
    if (pick === 4) return `[${ws()}${Array.from({ length: Math.floor(rnd() * 4) }, () => jsonText(rnd, depth + 1)).join(`${ws()},${ws()}`)}${ws()}]`;
    const keys = ["data", "events", "d\\u0061ta", "x", '{"}', "data"];
    const members = Array.from({ length: Math.floor(rnd() * 4) }, () => `${JSON.stringify(keys[Math.floor(rnd() * keys.length)]).replace("\\\\u0061", "\\u0061")}${ws()}:${ws()}${jsonText(rnd, depth + 1)}`);
    return `{${ws()}${members.join(`${ws()},${ws()}`)}${ws()}}`;
  }

  it("finds each event's data in random documents with nested decoys and duplicate keys inside them", () => {
    for (let seed = 1; seed <= 400; seed++) {
      const rnd = random(seed);
      // An event's own members are unique (a name given twice is refused, below); duplicates
      // inside its data and in non-event values nested under a member stay as decoys.
      const nonEvent = (t: string): string => (t.startsWith("{") ? `{"x":${t}}` : t);
      const events = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => (rnd() < 0.8 ? `{ "a":1, "data" : ${jsonText(rnd, 0)}, "z" : ${jsonText(rnd, 0)} }` : nonEvent(jsonText(rnd, 0))));
      const envelope = ` { "events" : [ ${events.join(" , ")} ] , "delay":1 }`;
      const parsed = JSON.parse(envelope) as { events: unknown[] };
      const found = envelopeDataTexts(envelope);
      const foundBatch = batchDataTexts(`[${events.join(",")}]`);
      expect(found, `seed ${seed}`).toHaveLength(parsed.events.length);
      parsed.events.forEach((event, i) => {
        const data = event !== null && typeof event === "object" && !Array.isArray(event) && Object.hasOwn(event, "data") ? (event as { data: unknown }).data : undefined;
        const text = found[i];
        expect(text === undefined ? undefined : JSON.parse(text), `seed ${seed}, event ${i}: ${events[i]}`).toEqual(data);
        expect(foundBatch[i], `seed ${seed}, event ${i}`).toBe(text);
        if (text !== undefined) expect(/[\s]/.test(text.replace(/"(?:[^"\\]|\\.)*"/g, "")), `seed ${seed}: whitespace left in ${text}`).toBe(false);
      });
      const single = events[0]!;
      expect(eventDataText(single), `seed ${seed}`).toBe(found[0]);
    }
  });
});
