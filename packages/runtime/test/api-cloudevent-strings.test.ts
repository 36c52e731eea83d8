import { describe, expect, it } from "vitest";
import { encodeProto } from "../src/wire/proto-codec.ts";
import { apiHarness, event } from "./api-harness.ts";

/**
 * CloudEvents' String type forbids control characters (U+0000-U+001F, U+007F-U+009F), Unicode
 * noncharacters and unpaired surrogates, and its URI types are strings too. An event holding one
 * is refused in every format, so nothing is stored that another CloudEvents receiver (or a
 * binary-mode hop, whose headers cannot carry a newline) would refuse.
 */
type Harness = Awaited<ReturnType<typeof apiHarness>>;

async function harnessWithQueue(): Promise<Harness & { path: string }> {
  const h = await apiHarness();
  await h.createQueue("jobs");
  return Object.assign(h, { path: h.queuePath("jobs") });
}

async function expectNothingStored(h: Harness & { path: string }): Promise<void> {
  const leased = await h.call("POST", `${h.path}:lease`, { body: {} });
  expect(leased.json.messages).toEqual([]);
}

const refusedInJson: Array<[string, Record<string, unknown>, string]> = [
  // [name, attributes over a valid event, field]
  ["a newline in id", { id: "a\nb" }, "events[0].id"],
  ["NUL in type", { type: "t\u0000" }, "events[0].type"],
  ["DEL in subject", { subject: "s\u007f" }, "events[0].subject"],
  ["a C1 control (NEL) in source", { source: "/s\u0085" }, "events[0].source"],
  ["a control in dataschema", { dataschema: "https://example.com/\u0001" }, "events[0].dataschema"],
  ["a control in datacontenttype's parameters", { datacontenttype: "text/plain; x=\u0002" }, "events[0].datacontenttype"],
  ["a noncharacter (U+FFFF) in an extension", { myext: "\uffff" }, "events[0].myext"],
  ["a noncharacter (U+FDD0) in id", { id: "\ufdd0" }, "events[0].id"],
  ["a plane-1 noncharacter (U+1FFFE) in subject", { subject: "\u{1fffe}" }, "events[0].subject"],
  ["an unpaired high surrogate in subject", { subject: "a\ud800" }, "events[0].subject"],
  ["an unpaired low surrogate in an extension", { myext: "\udead" }, "events[0].myext"],
];

describe("String attributes: no control characters, noncharacters or unpaired surrogates", () => {
  for (const [name, attributes, field] of refusedInJson) {
    it(`${name}: refused, naming the attribute and the code point`, async () => {
      const h = await harnessWithQueue();
      const res = await h.call("POST", `${h.path}:send`, { body: { events: [event("ok", 1, attributes)] } });
      expect(res.status).toBe(400);
      expect(res.json.error).toMatchObject({ code: "invalid_argument", field });
      expect(res.json.error.message).toMatch(/U\+[0-9A-F]{4,6}/);
      expect(res.json.error.bound).toContain("no control characters");
      await expectNothingStored(h);
    });
  }

  it("structured mode is held to it", async () => {
    const h = await harnessWithQueue();
    const res = await h.call("POST", `${h.path}:send`, {
      raw: JSON.stringify(event("a\tb")),
      headers: { "content-type": "application/cloudevents+json" },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_argument", field: "id" });
    expect(res.json.error.message).toContain("U+0009");
    await expectNothingStored(h);
  });

  it("binary mode: a percent-decoded control character is refused, naming the header", async () => {
    const h = await harnessWithQueue();
    const res = await h.call("POST", `${h.path}:send`, {
      raw: "{}",
      headers: { "ce-specversion": "1.0", "ce-id": "a%0Ab", "ce-source": "/s", "ce-type": "t", "content-type": "application/json" },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_argument", field: "ce-id" });
    expect(res.json.error.message).toContain("U+000A");
    await expectNothingStored(h);
  });

  it("protobuf: an attribute in the map is refused the same way", async () => {
    const h = await harnessWithQueue();
    const pb = { id: "p", source: "/s", spec_version: "1.0", type: "t", attributes: { subject: { ce_string: "x\u0000" } } };
    const res = await h.call("POST", `${h.path}:send`, {
      raw: encodeProto("SendRequest", { events: [pb] }),
      headers: { "content-type": "application/x-protobuf" },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_argument", field: "events[0].subject" });
    await expectNothingStored(h);
  });

  it("what the String type allows comes back unchanged: paired surrogates, non-ASCII letters, U+00A0, tabs in data", async () => {
    const h = await harnessWithQueue();
    const sent = event("😀-é", "tab\there\u0000too", {
      datacontenttype: "text/plain",
      subject: "caf\u00e9\u00a0\u{10fffd}",
      myext: "\u{1f600}",
      type: "com.example.\u20ac",
    });
    const res = await h.call("POST", `${h.path}:send`, { body: { events: [sent] } });
    expect(res.status).toBe(200);
    const leased = await h.call("POST", `${h.path}:lease`, { body: {} });
    expect(leased.json.messages[0].event).toEqual(sent);
  });
});
