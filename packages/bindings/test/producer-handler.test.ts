/**
 * The producer handler at the protocol level: requests workerd never sends (it validates its own),
 * cell lookups, and the Node adapter, against real cells. What a Worker sees through workerd is in
 * producer-worker.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import type Database from "better-sqlite3";
import { CellRegistry, ManualClock, QueueCell, SqliteCellStore, type SyncFile } from "@celld/queue-cell";
import { ProducerHandler, type ProducerBinding, type ProducerRequest } from "../src/producer-handler.ts";
import type { SendStages } from "../src/send-stages.ts";

let dir: string;
let clock: ManualClock;
let registry: CellRegistry;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "celld-producer-handler-"));
  clock = new ManualClock();
  registry = new CellRegistry({ dataDir: dir, clock, durability: "normal" });
});

afterEach(async () => {
  await registry.closeAll();
  rmSync(dir, { recursive: true, force: true });
});

function handler(overrides: Partial<ProducerBinding> = {}): ProducerHandler {
  return new ProducerHandler({ queue: "jobs", getCell: () => registry.open("jobs"), ...overrides });
}

function message(body: string, headers: Record<string, string> = {}): ProducerRequest {
  return { method: "POST", url: "/message", headers, body: new TextEncoder().encode(body) };
}

function batch(json: string, headers: Record<string, string> = {}): ProducerRequest {
  return { method: "POST", url: "/batch", headers, body: new TextEncoder().encode(json) };
}

const b64 = (s: string): string => Buffer.from(s).toString("base64");

async function takeAll(): Promise<{ contentType: string; body: string }[]> {
  const cell = await registry.open("jobs");
  const leased = await cell.lease({ max: 100 });
  return leased.map((m) => ({ contentType: m.contentType, body: Buffer.from(m.body).toString("utf8") }));
}

describe("POST /message", () => {
  test("stores the body with its format and answers with the backlog under metadata", async () => {
    const reply = await handler().handle(message("hello", { "x-msg-fmt": "text" }));
    expect(reply).toEqual({
      status: 200,
      statusText: "OK",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { metrics: { backlogCount: 1, backlogBytes: 5, oldestMessageTimestamp: clock.now() } } }),
    });
    expect(await takeAll()).toEqual([{ contentType: "text", body: "hello" }]);
  });

  test("no X-Msg-Fmt means v8, and formats are read in any case", async () => {
    await handler().handle(message("a"));
    await handler().handle(message("b", { "x-msg-fmt": "Bytes" }));
    expect((await takeAll()).map((m) => m.contentType)).toEqual(["v8", "bytes"]);
  });

  test("only a json body that is exactly the text undefined is refused as not JSON", async () => {
    const refused = await handler().handle(message("undefined", { "x-msg-fmt": "json" }));
    expect(refused.status).toBe(400);
    expect(refused.headers["cf-queues-error-code"]).toBe("10203");
    // The same bytes as text, a JSON string of the word, and other bodies of nine bytes are stored.
    for (const [body, fmt] of [["undefined", "text"], ['"undefined"', "json"], ["undefineD", "json"], ["123456789", "json"]]) {
      expect((await handler().handle(message(body!, { "x-msg-fmt": fmt! }))).status).toBe(200);
    }
    const refusedInBatch = await handler().handle(
      batch(JSON.stringify({ messages: [{ body: b64("1"), contentType: "json" }, { body: b64("undefined"), contentType: "JSON" }] })),
    );
    expect(refusedInBatch.headers["cf-queues-error-cause"]).toMatch(/^MessageMetadataInvalid: messages\[1\] has contentType json but its body is not JSON/);
    expect((await takeAll()).map((m) => m.body)).toEqual(["undefined", '"undefined"', "undefineD", "123456789"]);
  });

  test("an unknown format is refused with 10203 and nothing is stored", async () => {
    const reply = await handler().handle(message("a", { "x-msg-fmt": "xml" }));
    expect([reply.status, reply.statusText]).toEqual([
      400,
      'MessageMetadataInvalid: contentType must be one of v8, json, text, bytes; got "xml" (10203)',
    ]);
    expect(await takeAll()).toEqual([]);
  });

  test("a delay header that is not a number is refused quoting it", async () => {
    const reply = await handler().handle(message("a", { "x-msg-fmt": "text", "x-msg-delay-secs": "soon" }));
    expect([reply.status, reply.headers["cf-queues-error-code"], reply.headers["cf-queues-error-cause"]]).toEqual([
      400,
      "10202",
      'BatchDelayInvalid: delaySeconds must be a number from 0 to 86400 seconds, got "soon"',
    ]);
  });

  test("a whole-number delay header overrides the producer's delivery_delay", async () => {
    await handler({ deliveryDelaySeconds: 30 }).handle(message("a", { "x-msg-fmt": "text", "x-msg-delay-secs": "2" }));
    clock.advance(2_000);
    expect(await takeAll()).toEqual([{ contentType: "text", body: "a" }]);
  });
});

describe("POST /batch", () => {
  test("decodes base64 bodies; a message without contentType is v8", async () => {
    const reply = await handler().handle(
      batch(`{"messages":[{"body":"${b64("one")}","contentType":"text"},{"body":"${b64("two")}","delaySecs": 0}]}`),
    );
    expect(reply.status).toBe(200);
    expect(await takeAll()).toEqual([
      { contentType: "text", body: "one" },
      { contentType: "v8", body: "two" },
    ]);
  });

  const refusals: [string, string, number, string][] = [
    ["not JSON", "{", 10208, "JSONRequestBodyMalformed: the batch request is not JSON: "],
    ["no messages array", `{"message":[]}`, 10207, 'JSONRequestBodyInvalid: the batch request must be {"messages":[...]}'],
    ["a message that is not an object", `{"messages":[1]}`, 10207, "JSONRequestBodyInvalid: messages[0] must be an object"],
    ["a body that is not base64", `{"messages":[{"body":"a*b="}]}`, 10207, "JSONRequestBodyInvalid: messages[0].body must be a base64 string"],
    ["a body in base64url", `{"messages":[{"body":"QQ=="},{"body":"-_-_"}]}`, 10207, "JSONRequestBodyInvalid: messages[1].body must be a base64 string"],
    ["a body without its padding", `{"messages":[{"body":"QQ"}]}`, 10207, "JSONRequestBodyInvalid: messages[0].body must be a base64 string"],
    ["a body with stray bits in its last character", `{"messages":[{"body":"QR=="}]}`, 10207, "JSONRequestBodyInvalid: messages[0].body must be a base64 string"],
    ["a body that is not a string", `{"messages":[{"body":12}]}`, 10207, "JSONRequestBodyInvalid: messages[0].body must be a base64 string"],
    [
      "an unknown content type",
      `{"messages":[{"body":""},{"body":"","contentType":"yaml"}]}`,
      10203,
      'MessageMetadataInvalid: messages[1].contentType must be one of v8, json, text, bytes; got "yaml"',
    ],
    [
      "a delay that is not a number",
      `{"messages":[{"body":"","delaySecs":"5"}]}`,
      10202,
      'BatchDelayInvalid: messages[0].delaySeconds must be a number from 0 to 86400 seconds, got "5"',
    ],
    ["no messages", `{"messages":[]}`, 10206, "BatchCountOutOfBounds: the batch has 0 messages; a batch may have 1 to 100 messages"],
  ];
  for (const [name, json, code, cause] of refusals) {
    test(`refuses ${name} with ${code}`, async () => {
      const reply = await handler().handle(batch(json));
      expect(reply.headers["cf-queues-error-code"]).toBe(String(code));
      expect(reply.headers["cf-queues-error-cause"]!.startsWith(cause)).toBe(true);
      expect(await takeAll()).toEqual([]);
    });
  }
});

describe("GET /metrics and other routes", () => {
  test("metrics is the bare backlog object", async () => {
    await handler().handle(message("abc", { "x-msg-fmt": "text" }));
    const reply = await handler().handle({ method: "GET", url: "/metrics", headers: {}, body: new Uint8Array() });
    expect(JSON.parse(reply.body)).toEqual({ backlogCount: 1, backlogBytes: 3, oldestMessageTimestamp: clock.now() });
  });

  test("an unknown route is a 404 naming the routes there are", async () => {
    const reply = await handler().handle({ method: "GET", url: "/message?x=1", headers: {}, body: new Uint8Array() });
    expect([reply.status, reply.statusText]).toEqual([
      404,
      "UnknownInternalError: no route for GET /message; the queue binding uses POST /message, POST /batch and GET /metrics (15000)",
    ]);
  });
});

describe("finding the cell", () => {
  test("a cell that closed before the send is looked up again once; the message is stored once", async () => {
    const closed = await registry.open("jobs");
    await registry.close("jobs");
    expect(closed.isClosed).toBe(true);
    const cells = [closed];
    const reply = await handler({ getCell: async () => cells.shift() ?? registry.open("jobs") }).handle(
      message("again", { "x-msg-fmt": "text" }),
    );
    expect(reply.status).toBe(200);
    expect(await takeAll()).toEqual([{ contentType: "text", body: "again" }]);
  });

  test("a cell closed on both tries is a 503 with 15000", async () => {
    const closed = new QueueCell({ name: "jobs", path: join(dir, "closed.sqlite"), clock });
    await closed.close();
    const reply = await handler({ getCell: async () => closed }).handle(message("x", { "x-msg-fmt": "text" }));
    expect([reply.status, reply.statusText]).toEqual([503, 'UnknownInternalError: queue "jobs" is closed; nothing of this call was written (15000)']);
  });

  test("the cell of another queue is a host bug and is thrown", async () => {
    await expect(
      handler({ getCell: () => registry.open("other") }).handle(message("x", { "x-msg-fmt": "text" })),
    ).rejects.toThrow('producer of queue "jobs" was given the cell of queue "other"');
    expect(await (await registry.open("other")).counts()).toMatchObject({ ready: 0 });
  });

  test("a delivery_delay out of range is a host bug and is thrown at construction", () => {
    expect(() => handler({ deliveryDelaySeconds: 86_401 })).toThrow(RangeError);
    expect(() => handler({ deliveryDelaySeconds: 1.5 })).toThrow(RangeError);
    expect(() => handler({ deliveryDelaySeconds: 86_400 })).not.toThrow();
  });
});

describe("storage failures", () => {
  /** The cell's SQLite connection (private to its store; reached here only to fill its "disk"). */
  const connectionOf = (cell: QueueCell): Database.Database => (cell as unknown as { store: { db: Database.Database } }).store.db;

  test("a full disk is a 503 with 15000 saying nothing was sent and that sends resume; they do", async () => {
    const db = connectionOf(await registry.open("jobs"));
    // SQLite does not lower the cap below the file's size: a write needing a page more fails as
    // on a full disk, with SQLITE_FULL.
    db.pragma("max_page_count = 1");
    const big = "x".repeat(100_000);
    const reply = await handler().handle(message(big, { "x-msg-fmt": "text" }));
    expect([reply.status, reply.statusText]).toEqual([
      503,
      "UnknownInternalError: the queue's storage failed: database or disk is full (SQLITE_FULL); nothing of this call was written, " +
        "and writes resume by themselves once the disk has free space (15000)",
    ]);
    db.pragma("max_page_count = 1073741823");
    expect((await handler().handle(message(big, { "x-msg-fmt": "text" }))).status).toBe(200);
  });

  test("onStorageFailure is told of each call refused on storage, and of no other refusal", async () => {
    const told: string[] = [];
    const h = handler({ onStorageFailure: (error) => told.push(`${error.code} ${error.storage?.queue} ${error.storage?.cause}`) });
    const db = connectionOf(await registry.open("jobs"));
    db.pragma("max_page_count = 1");
    expect((await h.handle(message("x".repeat(100_000), { "x-msg-fmt": "text" }))).status).toBe(503);
    expect((await h.handle(message("x".repeat(100_000), { "x-msg-fmt": "text" }))).status).toBe(503);
    db.pragma("max_page_count = 1073741823");
    expect((await h.handle(message("x", { "x-msg-fmt": "rtf" }))).status).toBe(400);
    expect((await h.handle(message("x".repeat(200_000), { "x-msg-fmt": "text" }))).status).toBe(413);
    expect(told).toEqual(["ERR_STORAGE jobs disk-full", "ERR_STORAGE jobs disk-full"]);
  });

  test("a failed flush is a 503 saying the message may have been sent and the queue needs a restart", async () => {
    const syncFile: SyncFile = (_fd, done) => setImmediate(() => done(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" })));
    const store = new SqliteCellStore(join(dir, "flush.sqlite"), { durability: "full", syncFile });
    const cell = new QueueCell({ name: "jobs", store, clock });
    const reply = await handler({ getCell: async () => cell }).handle(message("x", { "x-msg-fmt": "text" }));
    expect([reply.status, reply.statusText]).toEqual([
      503,
      "UnknownInternalError: the queue's storage failed: flushing its log to disk failed (EIO: i/o error, fdatasync); this call may or " +
        "may not have taken effect, and the queue takes no more writes until celld is restarted (15000)",
    ]);
    await cell.close();
  });
});

describe("the Node adapter", () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
    server = undefined;
  });

  test("writes status, status text, error headers and a Cloudflare-shaped body", async () => {
    server = createServer(handler().node);
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const reply = await new Promise<{ status?: number; statusText?: string; headers: Record<string, unknown>; body: string }>(
      (resolve, reject) => {
        const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/message", headers: { "x-msg-fmt": "rtf" } }, (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (body += chunk));
          res.on("end", () => resolve({ status: res.statusCode, statusText: res.statusMessage, headers: res.headers, body }));
        });
        req.on("error", reject);
        req.end("x");
      },
    );
    const cause = 'MessageMetadataInvalid: contentType must be one of v8, json, text, bytes; got "rtf"';
    expect(reply.status).toBe(400);
    expect(reply.statusText).toBe(`${cause} (10203)`);
    expect(reply.headers["cf-queues-error-cause"]).toBe(cause);
    expect(reply.headers["cf-queues-error-code"]).toBe("10203");
    expect(JSON.parse(reply.body)).toEqual({ success: false, errors: [{ code: 10203, message: cause }] });
  });
  /** POSTs `body` to the adapter `h.node` on a server of its own; resolves with the status. */
  async function postTo(h: ProducerHandler, path: string, body: string, headers: Record<string, string>): Promise<number | undefined> {
    server = createServer(h.node);
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path, headers }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  test("tells each committed send's stages when asked, and none of a refused one", async () => {
    const told: SendStages[] = [];
    const h = handler({ onSendStages: (s) => told.push(s) });
    const json = JSON.stringify({ messages: [{ body: b64("1"), contentType: "text" }, { body: b64("2"), contentType: "text" }] });
    expect(await postTo(h, "/batch", json, { "cf-queue-batch-count": "2" })).toBe(200);
    expect(told).toHaveLength(1);
    const stages = told[0]!;
    expect(stages).toMatchObject({ call: "sendBatch", messages: 2 });
    const parts = [stages.readMs, stages.decodeMs, stages.waitMs, stages.commitMs, stages.flushMs, stages.answerMs];
    for (const ms of parts) expect(ms).toBeGreaterThanOrEqual(0);
    expect(parts.reduce((a, b) => a + b, 0)).toBeCloseTo(stages.totalMs, 6);
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    expect(await postTo(h, "/message", "x", { "x-msg-fmt": "rtf" })).toBe(400);
    expect(told).toHaveLength(1);
  });
});
