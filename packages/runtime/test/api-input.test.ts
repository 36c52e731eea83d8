import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { limits } from "@celld/queue-cell";
import { apiLimits } from "../src/api/index.ts";
import { apiHarness, event, eventually, testEnv } from "./api-harness.ts";

type Harness = Awaited<ReturnType<typeof apiHarness>>;

/** A text event whose data plus attributes are exactly `bytes` bytes, as the cell counts them. */
function sized(id: string, bytes: number): Record<string, unknown> {
  const attributes = JSON.stringify({ specversion: "1.0", id, source: "/tests", type: "test.event", datacontenttype: "text/plain" });
  const dataBytes = bytes - Buffer.byteLength(attributes);
  if (dataBytes < 0) throw new Error(`cannot make an event of ${bytes} bytes`);
  return { specversion: "1.0", id, source: "/tests", type: "test.event", datacontenttype: "text/plain", data: "x".repeat(dataBytes) };
}

function members(count: number): Record<string, number> {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, 0]));
}

function nested(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/**
 * A queue holding one leased and one ready message, and a check that both are exactly as they
 * were: a refused request must neither lose nor change what was accepted before it.
 */
async function withKeepers(h: Harness) {
  await h.createQueue("jobs");
  const path = h.queuePath("jobs");
  await h.call("POST", `${path}:send`, { body: { events: [event("leased-keeper", { v: 1 })] } });
  const [leased] = (await h.call("POST", `${path}:lease`, { body: { visibility_timeout: 3600 } })).json.messages;
  await h.call("POST", `${path}:send`, { body: { events: [event("ready-keeper", { v: 2 })] } });
  const before = (await h.call("GET", path)).json.counts;
  return {
    path,
    async check(): Promise<void> {
      expect((await h.call("GET", path)).json.counts).toEqual(before);
      const [ready] = (await h.call("POST", `${path}:lease`, { body: {} })).json.messages;
      expect(ready.event).toEqual(event("ready-keeper", { v: 2 }));
      expect(ready.delivery_count).toBe(1);
      const acked = await h.call("POST", `${path}:ack`, {
        body: { messages: [leased, ready].map((m) => ({ id: m.id, lease_generation: m.lease_generation })) },
      });
      expect(acked.json.acked).toBe(2);
    },
  };
}

interface BoundCase {
  name: string;
  /** [path suffix, body] accepted at the bound. */
  at: (path: string) => [string, unknown];
  /** ... and refused just past it. */
  past: (path: string) => [string, unknown];
  field: string;
  code?: string;
  method?: string;
}

const ref = (id = "01KDVDNA000000000000000000") => ({ id, lease_generation: 1 });

const boundCases: BoundCase[] = [
  {
    name: "events per send",
    at: () => [":send", { events: Array.from({ length: limits.batchMessagesMax }, (_, i) => event(`e${i}`)) }],
    past: () => [":send", { events: Array.from({ length: limits.batchMessagesMax + 1 }, (_, i) => event(`e${i}`)) }],
    field: "events",
    code: "out_of_range",
  },
  {
    name: "message bytes",
    at: () => [":send", { events: [sized("big", limits.messageBytesMax)] }],
    past: () => [":send", { events: [sized("big", limits.messageBytesMax + 1)] }],
    field: "events[0]",
    code: "message_too_large",
  },
  {
    name: "batch bytes",
    at: () => [":send", { events: [sized("a", limits.messageBytesMax), sized("b", limits.batchBytesMax - limits.messageBytesMax - 1000), sized("c", 1000)] }],
    past: () => [":send", { events: [sized("a", limits.messageBytesMax), sized("b", limits.batchBytesMax - limits.messageBytesMax - 1000), sized("c", 1001)] }],
    field: "events",
    code: "batch_too_large",
  },
  {
    name: "send delay",
    at: () => [":send", { events: [event("d")], delay: limits.delaySecondsMax }],
    past: () => [":send", { events: [event("d")], delay: limits.delaySecondsMax + 1 }],
    field: "delay",
  },
  {
    name: "lease size",
    at: () => [":lease", { max_messages: limits.leaseMessagesMax }],
    past: () => [":lease", { max_messages: limits.leaseMessagesMax + 1 }],
    field: "max_messages",
  },
  {
    name: "lease size minimum",
    at: () => [":lease", { max_messages: 1 }],
    past: () => [":lease", { max_messages: 0 }],
    field: "max_messages",
  },
  {
    name: "lease visibility_timeout",
    at: () => [":lease", { visibility_timeout: limits.visibilityTimeoutSecondsMax }],
    past: () => [":lease", { visibility_timeout: limits.visibilityTimeoutSecondsMax + 1 }],
    field: "visibility_timeout",
  },
  {
    name: "lease visibility_timeout minimum",
    at: () => [":lease", { visibility_timeout: limits.visibilityTimeoutSecondsMin }],
    past: () => [":lease", { visibility_timeout: limits.visibilityTimeoutSecondsMin - 1 }],
    field: "visibility_timeout",
  },
  {
    name: "lease wait",
    at: () => [":lease", { wait: limits.leaseWaitSecondsMax }],
    past: () => [":lease", { wait: limits.leaseWaitSecondsMax + 1 }],
    field: "wait",
  },
  {
    name: "references per ack",
    at: () => [":ack", { messages: Array.from({ length: limits.leaseMessagesMax }, () => ref()) }],
    past: () => [":ack", { messages: Array.from({ length: limits.leaseMessagesMax + 1 }, () => ref()) }],
    field: "messages",
  },
  {
    name: "nack delay",
    at: () => [":nack", { messages: [{ ...ref(), delay: limits.delaySecondsMax }] }],
    past: () => [":nack", { messages: [{ ...ref(), delay: limits.delaySecondsMax + 1 }] }],
    field: "messages[0].delay",
  },
  {
    name: "nack call delay",
    at: () => [":nack", { messages: [ref()], delay: limits.delaySecondsMax }],
    past: () => [":nack", { messages: [ref()], delay: limits.delaySecondsMax + 1 }],
    field: "delay",
  },
  {
    name: "extension attributes per event",
    at: () => [":send", { events: [event("x", 1, Object.fromEntries(Array.from({ length: apiLimits.eventExtensionsMax }, (_, i) => [`ext${i}`, i])))] }],
    past: () => [":send", { events: [event("x", 1, Object.fromEntries(Array.from({ length: apiLimits.eventExtensionsMax + 1 }, (_, i) => [`ext${i}`, i])))] }],
    field: "events[0]",
  },
  {
    name: "extension name length",
    at: () => [":send", { events: [event("x", 1, { ["e".repeat(apiLimits.eventExtensionNameCharsMax)]: "v" })] }],
    past: () => [":send", { events: [event("x", 1, { ["e".repeat(apiLimits.eventExtensionNameCharsMax + 1)]: "v" })] }],
    field: `events[0].${"e".repeat(apiLimits.eventExtensionNameCharsMax + 1)}`,
    code: "unknown_field",
  },
  {
    name: "attribute length",
    at: () => [":send", { events: [event("i".repeat(apiLimits.eventAttributeCharsMax))] }],
    past: () => [":send", { events: [event("i".repeat(apiLimits.eventAttributeCharsMax + 1))] }],
    field: "events[0].id",
  },
  {
    name: "datacontenttype length",
    at: () => [":send", { events: [event("x", "t", { datacontenttype: `text/${"p".repeat(limits.contentTypeCharsMax - 5)}` })] }],
    past: () => [":send", { events: [event("x", "t", { datacontenttype: `text/${"p".repeat(limits.contentTypeCharsMax - 4)}` })] }],
    field: "events[0].datacontenttype",
  },
  {
    // The body object, the events array and the event hold 3 levels; data takes the rest.
    name: "JSON depth",
    at: () => [":send", { events: [event("deep", nested(apiLimits.jsonDepthMax - 3))] }],
    past: () => [":send", { events: [event("deep", nested(apiLimits.jsonDepthMax - 2))] }],
    field: "events[0].data" + "[0]".repeat(apiLimits.jsonDepthMax - 3),
  },
  {
    name: "JSON array items",
    at: () => [":send", { events: [event("wide", new Array(apiLimits.jsonArrayItemsMax).fill(0))] }],
    past: () => [":send", { events: [event("wide", new Array(apiLimits.jsonArrayItemsMax + 1).fill(0))] }],
    field: "events[0].data",
  },
  {
    name: "JSON object members",
    at: () => [":send", { events: [event("wide", members(apiLimits.jsonObjectMembersMax))] }],
    past: () => [":send", { events: [event("wide", members(apiLimits.jsonObjectMembersMax + 1))] }],
    field: "events[0].data",
  },
  {
    name: "queue visibility_timeout",
    at: () => ["", { visibility_timeout: limits.visibilityTimeoutSecondsMax }],
    past: () => ["", { visibility_timeout: limits.visibilityTimeoutSecondsMax + 1 }],
    field: "visibility_timeout",
    method: "PATCH",
  },
  {
    name: "queue max_deliveries",
    at: () => ["", { max_deliveries: limits.maxDeliveriesMax }],
    past: () => ["", { max_deliveries: limits.maxDeliveriesMax + 1 }],
    field: "max_deliveries",
    method: "PATCH",
  },
  {
    name: "queue max_deliveries minimum",
    at: () => ["", { max_deliveries: limits.maxDeliveriesMin }],
    past: () => ["", { max_deliveries: limits.maxDeliveriesMin - 1 }],
    field: "max_deliveries",
    method: "PATCH",
  },
  {
    name: "queue delivery_delay",
    at: () => ["", { delivery_delay: limits.delaySecondsMax }],
    past: () => ["", { delivery_delay: limits.delaySecondsMax + 1 }],
    field: "delivery_delay",
    method: "PATCH",
  },
  {
    name: "replay from",
    at: () => [":replay", { from: "1970-01-01T00:00:00Z" }],
    past: () => [":replay", { from: "1969-12-31T23:59:59.999999999Z" }],
    field: "from",
  },
  {
    name: "replay to",
    at: () => [":replay", { to: "1970-01-01T00:00:00Z" }],
    past: () => [":replay", { to: "1969-12-31T23:59:59.999999999Z" }],
    field: "to",
  },
];

describe("every bound: accepted at the bound, refused one past it, and nothing accepted is touched", () => {
  for (const c of boundCases) {
    it(c.name, async () => {
      const h = await apiHarness();
      const keepers = await withKeepers(h);
      const method = c.method ?? "POST";
      const [pastSuffix, pastBody] = c.past(keepers.path);
      const refused = await h.call(method, `${keepers.path}${pastSuffix}`, { body: pastBody });
      expect(refused.status).toBe(400);
      expect(refused.json.error).toMatchObject({ code: c.code ?? "out_of_range", field: c.field });
      expect(refused.json.error.bound).toEqual(expect.any(String));
      await keepers.check();

      // Something to lease, so a long poll at its bound answers at once.
      await h.call("POST", `${keepers.path}:send`, { body: { events: [event("filler")] } });
      const [atSuffix, atBody] = c.at(keepers.path);
      const accepted = await h.call(method, `${keepers.path}${atSuffix}`, { body: atBody });
      expect(accepted.status).toBe(200);
    });
  }

  it("request body size: a send body at the cap is read, one byte more is 413 before parsing", async () => {
    const h = await apiHarness();
    const keepers = await withKeepers(h);
    await h.createQueue("other");
    const json = JSON.stringify({ events: [event("padded")] });
    const at = json + " ".repeat(apiLimits.sendBodyBytesMax - json.length);
    const ok = await h.call("POST", `${h.queuePath("other")}:send`, { raw: at, headers: { "content-type": "application/json" } });
    expect(ok.status).toBe(200);
    const over = await h.call("POST", `${keepers.path}:send`, { raw: `${at} `, headers: { "content-type": "application/json" } });
    expect(over.status).toBe(413);
    expect(over.json.error).toEqual({
      code: "body_too_large",
      message: `the request body is larger than ${apiLimits.sendBodyBytesMax} bytes`,
      field: "body",
      bound: `at most ${apiLimits.sendBodyBytesMax} bytes`,
    });
    const lease = JSON.stringify({ max_messages: 1 });
    const leaseOver = lease + " ".repeat(apiLimits.controlBodyBytesMax + 1 - lease.length);
    const leaseRefused = await h.call("POST", `${keepers.path}:lease`, { raw: leaseOver, headers: { "content-type": "application/json" } });
    expect(leaseRefused.status).toBe(413);
    expect(leaseRefused.json.error).toEqual({
      code: "body_too_large",
      message: `the request body is larger than ${apiLimits.controlBodyBytesMax} bytes`,
      field: "body",
      bound: `at most ${apiLimits.controlBodyBytesMax} bytes`,
    });
    await keepers.check();
  });

  it("a chunked body is cut off at the cap", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const url = new URL(`${h.server.url}${h.queuePath("jobs")}:lease`);
    const response = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(
          `POST ${url.pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.defaultKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
        );
        const chunk = " ".repeat(16 * 1024);
        for (let i = 0; i < 8; i++) socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
        // The rest is read and dropped; the connection closes once the body has ended.
        socket.write("0\r\n\r\n");
      });
      let text = "";
      socket.on("data", (d) => (text += d.toString()));
      socket.on("close", () => resolve(text));
      socket.on("error", reject);
    });
    expect(response.startsWith("HTTP/1.1 413")).toBe(true);
    expect(response.toLowerCase()).toContain("connection: close");
    expect(answerJson(response)).toMatchObject({ error: { code: "body_too_large", field: "body", bound: `at most ${apiLimits.controlBodyBytesMax} bytes` } });
  });
});

/**
 * A client that writes its whole request before it reads (Python's urllib, curl without Expect),
 * as raw HTTP/1.1: the write fails if the server closes the connection under it. Resolves with
 * everything the server sent, and how long after the request the connection closed.
 */
async function writeAllThenRead(url: string, head: string, body: Uint8Array): Promise<{ text: string; ms: number }> {
  const { port, hostname } = new URL(url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, async () => {
      const write = (chunk: string | Uint8Array): Promise<void> =>
        new Promise((done, fail) => {
          if (socket.write(chunk, (error) => (error ? fail(error) : undefined))) done();
          else socket.once("drain", done);
        });
      try {
        await write(head);
        for (let at = 0; at < body.byteLength; at += 64 * 1024) await write(body.subarray(at, at + 64 * 1024));
        await new Promise<void>((done, fail) => socket.write("", (error) => (error ? fail(error) : done())));
      } catch (error) {
        reject(error);
        return;
      }
      let text = "";
      socket.on("data", (d) => (text += d.toString()));
      socket.on("close", () => resolve({ text, ms: Date.now() - started }));
      socket.resume();
    });
    socket.on("error", reject);
  });
}

/**
 * Writes a request's head only, and reads what comes back until a final answer (not a 100) has
 * arrived whole; `body` is written once the server says `100 Continue`.
 */
async function firstAnswer(url: string, head: string, body?: string): Promise<string> {
  const { port, hostname } = new URL(url);
  return new Promise((resolve, reject) => {
    let text = "";
    const socket = connect(Number(port), hostname, () => socket.write(head));
    socket.on("data", (d) => {
      text += d.toString();
      if (body !== undefined && text.startsWith("HTTP/1.1 100 Continue\r\n\r\n") && !text.includes("\r\n\r\nHTTP/1.1 ")) {
        socket.write(body);
        body = undefined;
      }
      const final = text.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "");
      const headEnd = final.indexOf("\r\n\r\n");
      const length = /content-length: (\d+)/i.exec(final)?.[1];
      if (headEnd >= 0 && length !== undefined && final.length >= headEnd + 4 + Number(length)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on("error", reject);
  });
}

/** The JSON body of a raw answer. */
function answerJson(text: string): unknown {
  return JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4));
}

describe("a refused body is read and dropped, so the answer reaches a client that writes it all first", () => {
  it("an oversize body written whole, without Expect: the 413 arrives, then the connection closes", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const url = `${h.server.url}${h.queuePath("jobs")}:send`;
    // The size the bug was reported with: four times the cap and more, within the drain bound.
    const body = new Uint8Array(4_400_000).fill(0x20);
    expect(body.byteLength).toBeLessThanOrEqual(apiLimits.refusedBodyDrainBytesMax);
    const head = (auth: string) =>
      `POST ${new URL(url).pathname} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${body.byteLength}\r\n\r\n`;
    const oversize = await writeAllThenRead(url, head(`Authorization: Bearer ${h.defaultKey}\r\n`), body);
    expect(oversize.text.startsWith("HTTP/1.1 413")).toBe(true);
    expect(oversize.text.toLowerCase()).toContain("connection: close");
    expect(answerJson(oversize.text)).toMatchObject({ error: { code: "body_too_large" } });
    // Any refusal before the body is read is answered the same way.
    const unauthenticated = await writeAllThenRead(url, head(""), body);
    expect(unauthenticated.text.startsWith("HTTP/1.1 401")).toBe(true);
    expect(answerJson(unauthenticated.text)).toMatchObject({ error: { code: "unauthenticated" } });
    expect((await h.call("GET", h.queuePath("jobs"))).json.counts.ready).toBe(0);
  });

  it("Expect: 100-continue: a call refused for its size or key is answered before the body is asked for", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const url = `${h.server.url}${h.queuePath("jobs")}:send`;
    const body = JSON.stringify({ events: [event("a", { v: 1 })] });
    const head = (auth: string, length: number) =>
      `POST ${new URL(url).pathname} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
    const bearer = `Authorization: Bearer ${h.defaultKey}\r\n`;
    const oversize = await firstAnswer(url, head(bearer, apiLimits.sendBodyBytesMax + 1));
    expect(oversize.split("\r\n")[0]).toBe("HTTP/1.1 413 Payload Too Large");
    const unauthenticated = await firstAnswer(url, head("", body.length));
    expect(unauthenticated.split("\r\n")[0]).toBe("HTTP/1.1 401 Unauthorized");
    // Accepted: 100 Continue, then the body, then the answer.
    const accepted = await firstAnswer(url, head(bearer, body.length), body);
    expect(accepted.split("\r\n")[0]).toBe("HTTP/1.1 100 Continue");
    expect(accepted).toContain("HTTP/1.1 200 OK");
    expect((await h.call("GET", h.queuePath("jobs"))).json.counts.ready).toBe(1);
  });

  it("a body declared past the drain bound is not waited for: 413 and the connection closed at once", async () => {
    const h = await apiHarness({ timeouts: { refusedBodyDrainMs: 60_000 } });
    await h.createQueue("jobs");
    const url = `${h.server.url}${h.queuePath("jobs")}:send`;
    const head = `POST ${new URL(url).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.defaultKey}\r\nContent-Length: ${apiLimits.refusedBodyDrainBytesMax + 1}\r\n\r\n`;
    // Only the head: what the server closes on is then the client's to read.
    const { text, ms } = await writeAllThenRead(url, head, new Uint8Array(0));
    expect(text.startsWith("HTTP/1.1 413")).toBe(true);
    expect(ms).toBeLessThan(5_000);
  });

  it("a chunked body that goes on past the drain bound has the connection closed under it", async () => {
    const h = await apiHarness({ timeouts: { refusedBodyDrainMs: 60_000 } });
    await h.createQueue("jobs");
    const url = `${h.server.url}${h.queuePath("jobs")}:send`;
    const head = `POST ${new URL(url).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.defaultKey}\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const chunk = Buffer.concat([Buffer.from("10000\r\n"), Buffer.alloc(0x10000, 0x20), Buffer.from("\r\n")]);
    // Twice the bound, never ended: only the byte bound can close this before the time bound.
    const body = Buffer.concat(Array.from({ length: Math.ceil((2 * apiLimits.refusedBodyDrainBytesMax) / 0x10000) }, () => chunk));
    const started = Date.now();
    await writeAllThenRead(url, head, body).catch((error: NodeJS.ErrnoException) => expect(["EPIPE", "ECONNRESET"]).toContain(error.code));
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("a body that stops coming: the 413 is sent at once, and the connection closes at the time bound", async () => {
    const h = await apiHarness({ timeouts: { refusedBodyDrainMs: 300 } });
    await h.createQueue("jobs");
    const url = `${h.server.url}${h.queuePath("jobs")}:send`;
    const head = `POST ${new URL(url).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.defaultKey}\r\nContent-Length: ${apiLimits.sendBodyBytesMax + 1}\r\n\r\n`;
    let firstAnswerMs = -1;
    const { port, hostname } = new URL(url);
    const started = Date.now();
    const closedMs = await new Promise<number>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.write(`${head}{"events":`));
      socket.on("data", (d) => {
        if (firstAnswerMs < 0 && d.toString().startsWith("HTTP/1.1 413")) firstAnswerMs = Date.now() - started;
      });
      socket.on("close", () => resolve(Date.now() - started));
      socket.on("error", reject);
    });
    expect(firstAnswerMs).toBeGreaterThanOrEqual(0);
    expect(closedMs).toBeGreaterThanOrEqual(300);
    expect(closedMs).toBeLessThan(5_000);
  });
});

describe("malformed input: a 400 whose JSON names the field", () => {
  const cases: Array<[string, string, unknown, string, string]> = [
    // [name, route suffix, body, code, field]
    ["specversion missing", ":send", { events: [{ id: "a", source: "/s", type: "t" }] }, "invalid_argument", "events[0].specversion"],
    ["specversion wrong", ":send", { events: [event("a", 1, { specversion: "0.3" })] }, "invalid_argument", "events[0].specversion"],
    ["id missing", ":send", { events: [{ specversion: "1.0", source: "/s", type: "t" }] }, "invalid_argument", "events[0].id"],
    ["id empty", ":send", { events: [event("")] }, "out_of_range", "events[0].id"],
    ["type not a string", ":send", { events: [event("a", 1, { type: 7 })] }, "invalid_argument", "events[0].type"],
    ["source missing", ":send", { events: [{ specversion: "1.0", id: "a", type: "t" }] }, "invalid_argument", "events[0].source"],
    ["source with spaces", ":send", { events: [event("a", 1, { source: "not a uri" })] }, "invalid_argument", "events[0].source"],
    ["datacontenttype not a media type", ":send", { events: [event("a", 1, { datacontenttype: "json" })] }, "invalid_argument", "events[0].datacontenttype"],
    ["dataschema relative", ":send", { events: [event("a", 1, { dataschema: "schema.json" })] }, "invalid_argument", "events[0].dataschema"],
    ["time not RFC 3339", ":send", { events: [event("a", 1, { time: "yesterday" })] }, "invalid_argument", "events[0].time"],
    ["time impossible date", ":send", { events: [event("a", 1, { time: "2026-02-30T00:00:00Z" })] }, "invalid_argument", "events[0].time"],
    ["subject empty", ":send", { events: [event("a", 1, { subject: "" })] }, "out_of_range", "events[0].subject"],
    ["extension named in camelCase", ":send", { events: [event("a", 1, { dataContentType: "x" })] }, "unknown_field", "events[0].dataContentType"],
    // JSON.parse makes "__proto__" an own member; copied by assignment it set the prototype and vanished.
    ["a member named __proto__", ":send", { events: [JSON.parse('{"specversion":"1.0","id":"a","source":"/s","type":"t","__proto__":{"subject":"x"}}')] }, "unknown_field", "events[0].__proto__"],
    ["extension value an object", ":send", { events: [event("a", 1, { traceparent: { a: 1 } })] }, "invalid_argument", "events[0].traceparent"],
    ["extension value a fraction", ":send", { events: [event("a", 1, { weight: 1.5 })] }, "invalid_argument", "events[0].weight"],
    ["data and data_base64", ":send", { events: [event("a", 1, { data_base64: "AA==" })] }, "invalid_argument", "events[0].data_base64"],
    ["data_base64 not base64", ":send", { events: [{ ...event("a"), data: undefined, data_base64: "%%%" }] }, "invalid_argument", "events[0].data_base64"],
    ["non-JSON data not a string", ":send", { events: [event("a", { x: 1 }, { datacontenttype: "text/plain" })] }, "invalid_argument", "events[0].data"],
    ["event not an object", ":send", { events: ["hello"] }, "invalid_argument", "events[0]"],
    ["events not an array", ":send", { events: { a: 1 } }, "invalid_argument", "events"],
    ["events missing", ":send", {}, "invalid_argument", "events"],
    ["unknown send field", ":send", { events: [event("a")], delaySeconds: 5 }, "unknown_field", "delaySeconds"],
    ["delay a string", ":send", { events: [event("a")], delay: "5" }, "invalid_argument", "delay"],
    ["delay a fraction", ":send", { events: [event("a")], delay: 1.5 }, "invalid_argument", "delay"],
    ["unknown lease field", ":lease", { max: 5 }, "unknown_field", "max"],
    ["bad message id", ":ack", { messages: [{ id: "not-an-id", lease_generation: 1 }] }, "invalid_argument", "messages[0].id"],
    ["lowercase message id", ":ack", { messages: [{ id: "01kdvdna000000000000000000", lease_generation: 1 }] }, "invalid_argument", "messages[0].id"],
    ["lease_generation zero", ":ack", { messages: [{ id: "01KDVDNA000000000000000000", lease_generation: 0 }] }, "out_of_range", "messages[0].lease_generation"],
    ["lease_generation missing", ":ack", { messages: [{ id: "01KDVDNA000000000000000000" }] }, "invalid_argument", "messages[0].lease_generation"],
    ["delay on an ack", ":ack", { messages: [{ id: "01KDVDNA000000000000000000", lease_generation: 1, delay: 5 }] }, "unknown_field", "messages[0].delay"],
    ["ack with nothing", ":ack", { messages: [] }, "out_of_range", "messages"],
    ["replay from not a time", ":replay", { from: 12 }, "invalid_argument", "from"],
    // Year 70, not 1970: before the bound, however Date.UTC would read it.
    ["replay from in year 0070", ":replay", { from: "0070-01-01T00:00:00Z" }, "out_of_range", "from"],
    ["replay to before from", ":replay", { from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z" }, "out_of_range", "to"],
    ["purge without scope", ":purge", {}, "invalid_argument", "scope"],
    ["body an array", ":lease", [], "invalid_argument", ""],
  ];
  for (const [name, suffix, body, code, field] of cases) {
    it(name, async () => {
      const h = await apiHarness();
      const keepers = await withKeepers(h);
      const res = await h.call("POST", `${keepers.path}${suffix}`, { body });
      expect(res.status).toBe(400);
      const expected: Record<string, unknown> = { code };
      if (field !== "") expected["field"] = field;
      expect(res.json.error).toMatchObject(expected);
      expect(res.json.error.message).toEqual(expect.any(String));
      await keepers.check();
    });
  }

  it("numbers past what JSON holds exactly: one rule (out_of_range), quoting the text sent, never a rounded value", async () => {
    const h = await apiHarness();
    const keepers = await withKeepers(h);
    const json = { "content-type": "application/json" };
    const cases: Array<[string, string, string, string]> = [
      [":lease", `{"max_messages": 1${"0".repeat(400)}}`, "max_messages", `max_messages must be from 1 to 100, got 1${"0".repeat(23)}… (401 characters)`],
      [":lease", '{"max_messages": 1e308}', "max_messages", "max_messages must be from 1 to 100, got 1e308"],
      [":lease", '{"max_messages": 101}', "max_messages", "max_messages must be from 1 to 100, got 101"],
      [":lease", '{"wait": -1E400}', "wait", "wait must be from 0 to 20 seconds, got -1E400"],
      [
        ":ack",
        '{"messages": [{"id": "01KDVDNA000000000000000000", "lease_generation": 1}, {"id": "01KDVDNA000000000000000001", "lease_generation": 9007199254740993}]}',
        "messages[1].lease_generation",
        // The text sent: JSON.parse alone would have said 9007199254740992.
        "messages[1].lease_generation must be from 1 to 9007199254740991, got 9007199254740993",
      ],
    ];
    for (const [suffix, raw, field, message] of cases) {
      const res = await h.call("POST", `${keepers.path}${suffix}`, { raw: new TextEncoder().encode(raw), headers: json });
      expect(res.json.error, raw.slice(0, 60)).toEqual({ code: "out_of_range", message, field, bound: expect.any(String) });
    }
    await keepers.check();
  });

  it("a member given twice anywhere in a control body is refused, naming it, and nothing is touched", async () => {
    const h = await apiHarness();
    const keepers = await withKeepers(h);
    const ref = '{"id":"01KDVDNA000000000000000000","lease_generation":1';
    const cases: Array<[string, string, string, string]> = [
      // [method, route suffix, raw body, field]
      ["POST", ":ack", `{"messages":[${ref},"lease_generation":2}]}`, "messages[0].lease_generation"],
      ["POST", ":nack", `{"messages":[${ref}}],"delay":0,"delay":3600}`, "delay"],
      ["POST", ":lease", '{"max_messages":1,"max\\u005fmessages":100}', "max_messages"],
      ["PATCH", "", '{"max_deliveries":1,"max_deliveries":2}', "max_deliveries"],
      ["POST", ":purge", '{"scope":"dead","scope":"all"}', "scope"],
    ];
    for (const [method, suffix, raw, field] of cases) {
      const res = await h.call(method, `${keepers.path}${suffix}`, { raw, headers: { "content-type": "application/json" } });
      expect(res.status, `${suffix} ${raw}`).toBe(400);
      expect(res.json.error).toEqual({
        code: "invalid_argument",
        message: `${field} is given twice; a member's name must be unique in its object`,
        field,
        bound: "one member of each name",
      });
    }
    expect((await h.call("GET", keepers.path)).json.max_deliveries).toBe(limits.maxDeliveriesDefault);
    await keepers.check();
  });

  it("malformed JSON, invalid UTF-8 and a protobuf body on a JSON-only route", async () => {
    const h = await apiHarness();
    const keepers = await withKeepers(h);
    const bad = await h.call("POST", `${keepers.path}:send`, { raw: '{"events": [', headers: { "content-type": "application/json" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toEqual({ code: "malformed_body", message: "the request body is not valid JSON" });
    const utf8 = await h.call("POST", `${keepers.path}:send`, {
      raw: new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]),
      headers: { "content-type": "application/json" },
    });
    expect(utf8.json.error).toEqual({ code: "malformed_body", message: "the request body is not valid UTF-8" });
    const proto = await h.call("POST", `${keepers.path}:replay`, { raw: new Uint8Array([1]), headers: { "content-type": "application/x-protobuf" } });
    expect(proto.status).toBe(415);
    const xml = await h.call("POST", `${keepers.path}:send`, { raw: "<x/>", headers: { "content-type": "application/xml" } });
    expect(xml.status).toBe(415);
    expect(xml.json.error).toMatchObject({ code: "unsupported_media_type", field: "Content-Type" });
    const accept = await h.call("GET", keepers.path, { headers: { accept: "text/html" } });
    expect(accept.status).toBe(406);
    await keepers.check();
  });

  it("routes: unknown path 404, wrong method 405 with Allow", async () => {
    const h = await apiHarness();
    const none = await h.call("GET", "/v1/nothing/here");
    expect(none.status).toBe(404);
    expect(none.json.error.code).toBe("not_found");
    const method = await h.call("PUT", `/v1/${testEnv}/queues/jobs`, { body: {} });
    expect(method.status).toBe(405);
    expect(method.headers["allow"]).toBe("GET, PATCH, DELETE");
  });
});

describe("null: left out where a field is optional, refused as missing where it is required", () => {
  it("optional fields given as null take their defaults, or stay as they were on a PATCH", async () => {
    const h = await apiHarness();
    await h.createQueue("dlq");
    const created = await h.call("POST", `/v1/${testEnv}/queues`, {
      body: { name: "jobs", visibility_timeout: null, max_deliveries: null, delivery_delay: null, dead_letter_queue: null },
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      visibility_timeout: limits.visibilityTimeoutSecondsDefault,
      max_deliveries: limits.maxDeliveriesDefault,
      delivery_delay: 0,
      dead_letter_queue: null,
    });
    const path = h.queuePath("jobs");
    await h.call("PATCH", path, { body: { max_deliveries: 2, dead_letter_queue: "dlq" } });
    const patched = await h.call("PATCH", path, { body: { visibility_timeout: null, max_deliveries: null } });
    expect(patched.json).toMatchObject({ max_deliveries: 2, dead_letter_queue: `${testEnv}/queues/dlq` });
    // Where null has a meaning of its own it keeps it: the queue's own dead-letter set.
    expect((await h.call("PATCH", path, { body: { dead_letter_queue: null } })).json.dead_letter_queue).toBeNull();

    // CloudEvents' JSON format reads a null attribute as unset; data: null is JSON null as data.
    const sent = await h.call("POST", `${path}:send`, {
      body: {
        events: [{ ...event("a", null), subject: null, time: null, datacontenttype: null, traceparent: null, data_base64: null }],
        delay: null,
      },
    });
    expect(sent.status).toBe(200);
    const leased = await h.call("POST", `${path}:lease`, { body: { max_messages: null, visibility_timeout: null, wait: null } });
    expect(leased.json.messages.map((m: { event: unknown }) => m.event)).toEqual([event("a", null)]);
    expect(leased.json.messages[0].lease_expire_time).toBe("2026-01-01T00:00:30.000Z");
    const [m] = leased.json.messages;
    const nacked = await h.call("POST", `${path}:nack`, { body: { messages: [{ id: m.id, lease_generation: m.lease_generation, delay: null }], delay: null } });
    expect(nacked.json).toMatchObject({ retried: 1, dead_lettered: 0 });
    // No delay, of its own or the call's: leasable again at once.
    expect((await h.call("POST", `${path}:lease`, { body: {} })).json.messages).toHaveLength(1);

    await h.createQueue("own", { max_deliveries: 1 });
    const own = h.queuePath("own");
    await h.call("POST", `${own}:send`, { body: { events: [event("d")] } });
    const [d] = (await h.call("POST", `${own}:lease`, { body: {} })).json.messages;
    await h.call("POST", `${own}:nack`, { body: { messages: [{ id: d.id, lease_generation: d.lease_generation }] } });
    expect((await h.call("POST", `${own}:replay`, { body: { from: null, to: null } })).json).toEqual({ replayed: 1 });

    const subs = `/v1/${testEnv}/subscriptions`;
    const sub = await h.call("POST", subs, { body: { name: "all", queue: "own", filter: { types: null, sources: ["/tests"] } } });
    expect(sub.json.filter).toEqual({ types: [], sources: ["/tests"] });
    const kept = await h.call("PATCH", `${subs}/all`, { body: { queue: null, filter: null } });
    expect(kept.json).toMatchObject({ queue: `${testEnv}/queues/own`, filter: { types: [], sources: ["/tests"] } });
    expect((await h.call("POST", subs, { body: { name: "none", queue: "own", filter: null } })).json.filter).toEqual({ types: [], sources: [] });
  });

  it("a required field given as null is refused as missing, and nothing is touched", async () => {
    const h = await apiHarness();
    const keepers = await withKeepers(h);
    const id = "01KDVDNA000000000000000000";
    const cases: Array<[string, string, unknown, string]> = [
      // [method, path, body, field]
      ["POST", `/v1/${testEnv}/queues`, { name: null }, "name"],
      ["POST", `${keepers.path}:send`, { events: null }, "events"],
      ["POST", `${keepers.path}:send`, { events: [{ ...event("a"), specversion: null }] }, "events[0].specversion"],
      ["POST", `${keepers.path}:send`, { events: [{ ...event("a"), id: null }] }, "events[0].id"],
      ["POST", `${keepers.path}:send`, { events: [{ ...event("a"), source: null }] }, "events[0].source"],
      ["POST", `${keepers.path}:ack`, { messages: null }, "messages"],
      ["POST", `${keepers.path}:ack`, { messages: [{ id: null, lease_generation: 1 }] }, "messages[0].id"],
      ["POST", `${keepers.path}:nack`, { messages: [{ id, lease_generation: null }] }, "messages[0].lease_generation"],
      ["POST", `${keepers.path}:purge`, { scope: null }, "scope"],
      ["POST", `/v1/${testEnv}/subscriptions`, { name: null, queue: "jobs" }, "name"],
      ["POST", `/v1/${testEnv}/subscriptions`, { name: "s", queue: null }, "queue"],
      ["POST", `/v1/${testEnv}/events:publish`, { events: null }, "events"],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await h.call(method, path, { body });
      expect([field, res.status, res.json.error.code, res.json.error.field]).toEqual([field, 400, "invalid_argument", field]);
      expect(res.json.error.message).toMatch(new RegExp(`^${field.replace(/[[\]]/g, "\\$&")} is required`));
      expect(res.json.error.bound).toEqual(expect.any(String));
    }
    // A null member the route does not know is still refused by name.
    const unknown = await h.call("POST", `${keepers.path}:lease`, { body: { visibilty_timeout: null } });
    expect(unknown.json.error).toMatchObject({ code: "unknown_field", field: "visibilty_timeout" });
    const extension = await h.call("POST", `${keepers.path}:send`, { body: { events: [{ ...event("a"), Trace: null }] } });
    expect(extension.json.error).toMatchObject({ code: "unknown_field", field: "events[0].Trace" });
    await keepers.check();
  });
});

describe("slow clients time out", () => {
  async function rawExchange(url: string, write: string): Promise<{ text: string; ms: number }> {
    const { port, hostname } = new URL(url);
    const started = Date.now();
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.write(write));
      let text = "";
      socket.on("data", (d) => (text += d.toString()));
      socket.on("close", () => resolve({ text, ms: Date.now() - started }));
      socket.on("error", reject);
    });
  }

  it("headers that never finish: 408 and the connection closed", async () => {
    const h = await apiHarness({ timeouts: { headersMs: 200, requestMs: 400, checkIntervalMs: 50 } });
    const { text, ms } = await rawExchange(h.server.url, `GET /v1/${testEnv}/queues HTTP/1.1\r\nHost: x\r\n`);
    expect(text.startsWith("HTTP/1.1 408")).toBe(true);
    expect(ms).toBeLessThan(5_000);
  });

  it("a body that never finishes: 408 and the connection closed", async () => {
    const h = await apiHarness({ timeouts: { headersMs: 200, requestMs: 400, checkIntervalMs: 50 } });
    await h.createQueue("jobs");
    const { text } = await rawExchange(
      h.server.url,
      `POST /v1/${testEnv}/queues/jobs:send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.defaultKey}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"events":`,
    );
    expect(text.startsWith("HTTP/1.1 408")).toBe(true);
    expect((await h.call("GET", h.queuePath("jobs"))).json.counts.ready).toBe(0);
  });

  it("a client that stops reading its answer has the connection closed, and the answer dropped", async () => {
    // Otherwise each such connection held its answer in memory for as long as the client liked:
    // one key's unread leases of 100 large messages took about 16 MB each, without bound.
    const h = await apiHarness({ timeouts: { socketIdleMs: 100 } });
    await h.createQueue("big");
    const data = "x".repeat(limits.messageBytesMax - 1_000);
    for (let i = 0; i < 100; i++) {
      const sent = await h.call("POST", `${h.queuePath("big")}:send`, { body: { events: [event(`e${i}`, data)] } });
      expect(sent.status).toBe(200);
    }
    const { port, hostname } = new URL(h.server.url);
    const body = JSON.stringify({ max_messages: 100 });
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `POST /v1/${testEnv}/queues/big:lease HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.defaultKey}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
    });
    // Reads nothing while the answer (about 13 MB, more than the kernel buffers hold) is written.
    socket.pause();
    await eventually(async () => (await h.call("GET", h.queuePath("big"))).json.counts.leased === 100);
    // The idle bound is Node's socket timer, on real time: give it several of its windows.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    let received = 0;
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.on("data", (chunk: Buffer) => (received += chunk.byteLength));
    socket.on("error", () => {});
    socket.resume();
    // Before, the whole answer came and the connection stayed open for the next request.
    await closed;
    expect(received).toBeLessThan(100 * (limits.messageBytesMax - 1_000));
  }, 15_000);
});
