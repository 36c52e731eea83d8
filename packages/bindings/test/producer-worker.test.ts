/**
 * The producer side as a Worker author meets it: real workerd (through Miniflare and the host's
 * queue wiring), the genuine `env.JOBS` binding, and real cells on a temporary data directory.
 * The wiring lives in @celld/runtime; this test imports it as the host does.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import v8 from "node:v8";
import { Miniflare } from "miniflare";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { CellRegistry, ManualClock, type LeasedMessage, type QueueCell } from "@celld/queue-cell";
import { queueProducerWorkerOptions, type QueueProducerWiring } from "../../runtime/src/queue-transport/miniflare-queue-wiring.ts";
import { ProducerServer } from "../../runtime/src/queue-transport/producer-server.ts";
import { nodeProducerHandler } from "../src/producer-handler.ts";

const workerScript = /* js */ `
const sample = () => ({
  when: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)),
  map: new Map([["a", 1], ["b", [2, 3]]]),
  bytes: new Uint8Array([0, 1, 2, 255]),
});
// JSON cannot carry every body a test needs, so the Worker builds the large and special ones.
function value(spec) {
  if (spec !== null && typeof spec === "object") {
    if ("$text" in spec) return "t".repeat(spec.$text);
    if ("$bytes" in spec) return new Uint8Array(spec.$bytes).fill(7);
    if ("$v8sample" in spec) return sample();
  }
  return spec;
}
export default {
  async fetch(request, env) {
    const { binding = "JOBS", op, body, options, messages, count } = await request.json();
    const queue = env[binding];
    try {
      let result;
      if (op === "send") result = await queue.send(value(body), options);
      else if (op === "sendBatch") result = await queue.sendBatch(messages.map((m) => ({ ...m, body: value(m.body) })), options);
      else if (op === "metrics") result = await queue.metrics();
      else if (op === "flood") {
        const settled = await Promise.allSettled(
          Array.from({ length: count }, (_, i) => queue.send({ i }, { contentType: "json" })),
        );
        result = settled.map((s) => (s.status === "fulfilled" ? null : s.reason.message));
      } else throw new Error("unknown op " + op);
      return Response.json({ ok: true, result });
    } catch (error) {
      return Response.json({ ok: false, name: error.name, message: error.message });
    }
  },
};
`;

interface TestState {
  dir: string;
  clock: ManualClock;
  registry: CellRegistry;
  /** Runs before each producer request takes its cell; a test uses it to line requests up. */
  beforeCell?: () => Promise<void>;
}

let state: TestState | undefined;
let mf: Miniflare;

function current(): TestState {
  if (state === undefined) throw new Error("no test state");
  return state;
}

function workerOptions(server: ProducerServer, name: string, compatibilityDate: string, producers: QueueProducerWiring[]) {
  const wiring = queueProducerWorkerOptions(
    producers,
    (producer) =>
      nodeProducerHandler({
        queue: producer.queue,
        deliveryDelaySeconds: producer.deliveryDelaySeconds,
        getCell: async () => {
          await current().beforeCell?.();
          return current().registry.open(producer.queue);
        },
      }),
    server,
  );
  return { name, modules: true, script: workerScript, compatibilityDate, ...wiring };
}

let server: ProducerServer;

beforeAll(async () => {
  server = await ProducerServer.start();
  mf = new Miniflare({
    cf: false,
    workers: [
      // From 2026-03-12 workerd reports queue errors as "<cause> (<code>)"; from 2024-03-18 the
      // default content type is json.
      workerOptions(server, "modern", "2026-04-26", [
        { binding: "JOBS", queue: "jobs" },
        { binding: "DELAYED", queue: "delayed", deliveryDelaySeconds: 30 },
      ]),
      // Before both: "Queue send failed: <statusText>", and v8 by default.
      workerOptions(server, "legacy", "2024-01-01", [{ binding: "JOBS", queue: "jobs" }]),
    ],
  });
  await mf.ready;
});

afterAll(async () => {
  await mf?.dispose();
  await server?.close();
});

beforeEach(() => {
  const dir = mkdtempSync(join(tmpdir(), "celld-producer-"));
  const clock = new ManualClock();
  state = { dir, clock, registry: new CellRegistry({ dataDir: dir, clock, durability: "normal" }) };
});

afterEach(async () => {
  const s = current();
  state = undefined;
  await s.registry.closeAll();
  rmSync(s.dir, { recursive: true, force: true });
});

type Outcome = { ok: true; result: unknown } | { ok: false; name: string; message: string };

async function run(worker: "modern" | "legacy", payload: Record<string, unknown>): Promise<Outcome> {
  const fetcher = await mf.getWorker(worker);
  const response = await fetcher.fetch("http://worker/", { method: "POST", body: JSON.stringify(payload) });
  return (await response.json()) as Outcome;
}

async function ok(worker: "modern" | "legacy", payload: Record<string, unknown>): Promise<unknown> {
  const outcome = await run(worker, payload);
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.name}: ${outcome.message}`);
  return outcome.result;
}

async function refusal(worker: "modern" | "legacy", payload: Record<string, unknown>): Promise<string> {
  const outcome = await run(worker, payload);
  if (outcome.ok) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.result)}`);
  expect(outcome.name).toBe("Error");
  return outcome.message;
}

const cell = (queue = "jobs"): Promise<QueueCell> => current().registry.open(queue);

/** Leases and acks every ready message: what is visible now, each message once. */
async function takeAll(queue = "jobs"): Promise<LeasedMessage[]> {
  const c = await cell(queue);
  const all: LeasedMessage[] = [];
  for (;;) {
    const batch = await c.lease({ max: 100 });
    await c.ack(batch.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
    all.push(...batch);
    if (batch.length < 100) return all;
  }
}

async function stored(queue = "jobs"): Promise<number> {
  const counts = await (await cell(queue)).counts();
  return counts.ready + counts.delayed + counts.leased;
}

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString("utf8");

function fromV8(bytes: Uint8Array): unknown {
  const deserializer = new v8.Deserializer(bytes);
  deserializer.readHeader();
  return deserializer.readValue();
}

describe("bodies reach the cell as workerd encoded them", () => {
  test("text, json and bytes keep their bytes and content type", async () => {
    await ok("modern", { op: "send", body: "héllo", options: { contentType: "text" } });
    await ok("modern", { op: "send", body: { a: [1, "b"] }, options: { contentType: "json" } });
    await ok("modern", { op: "send", body: { $bytes: 3 }, options: { contentType: "bytes" } });
    await ok("modern", { op: "send", body: "up", options: { contentType: "TEXT" } });
    const leased = await takeAll();
    expect(leased.map((m) => m.contentType)).toEqual(["text", "json", "bytes", "text"]);
    expect(text(leased[0]!.body)).toBe("héllo");
    expect(text(leased[1]!.body)).toBe('{"a":[1,"b"]}');
    expect([...leased[2]!.body]).toEqual([7, 7, 7]);
    expect(text(leased[3]!.body)).toBe("up");
  });

  test("v8 bytes are workerd's structured clone and deserialize in Node to the same values", async () => {
    await ok("modern", { op: "send", body: { $v8sample: true }, options: { contentType: "v8" } });
    await ok("modern", { op: "sendBatch", messages: [{ body: { $v8sample: true }, contentType: "v8" }] });
    const leased = await takeAll();
    expect(leased).toHaveLength(2);
    for (const message of leased) {
      expect(message.contentType).toBe("v8");
      expect(fromV8(message.body)).toEqual({
        when: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)),
        map: new Map<string, unknown>([["a", 1], ["b", [2, 3]]]),
        bytes: new Uint8Array([0, 1, 2, 255]),
      });
    }
    expect(Buffer.from(leased[0]!.body).equals(Buffer.from(leased[1]!.body))).toBe(true);
  });

  test("the default content type follows the compatibility date: json from 2024-03-18, v8 before", async () => {
    await ok("modern", { op: "send", body: { n: 1 } });
    await ok("legacy", { op: "send", body: { n: 2 } });
    await ok("legacy", { op: "sendBatch", messages: [{ body: { n: 3 } }] });
    const [modern, legacySend, legacyBatch] = await takeAll();
    expect(modern!.contentType).toBe("json");
    expect(text(modern!.body)).toBe('{"n":1}');
    expect(legacySend!.contentType).toBe("v8");
    expect(fromV8(legacySend!.body)).toEqual({ n: 2 });
    expect(legacyBatch!.contentType).toBe("v8");
    expect(fromV8(legacyBatch!.body)).toEqual({ n: 3 });
  });

  test("sendBatch applies per-message content types and delays over the batch delay", async () => {
    const { clock } = current();
    await ok("modern", {
      op: "sendBatch",
      messages: [
        { body: "first", contentType: "text" },
        { body: { second: true }, delaySeconds: 60 },
        { body: { $bytes: 2 }, contentType: "bytes", delaySeconds: 0 },
      ],
      options: { delaySeconds: 10 },
    });
    const now = await takeAll();
    expect(now.map((m) => m.contentType)).toEqual(["bytes"]);
    clock.advance(10_000);
    const after10 = await takeAll();
    expect(after10.map((m) => text(m.body))).toEqual(["first"]);
    clock.advance(49_999);
    expect(await takeAll()).toEqual([]);
    clock.advance(1);
    const after60 = await takeAll();
    expect(after60.map((m) => [m.contentType, text(m.body)])).toEqual([["json", '{"second":true}']]);
  });
});

describe("limits: accepted at the bound, refused one past it with Cloudflare's text and code", () => {
  const cases: {
    name: string;
    atBound: Record<string, unknown>;
    pastBound: Record<string, unknown>;
    /** Messages the at-bound call stores. */
    stores: number;
    message: string;
  }[] = [
    {
      name: "send: message size 128000 bytes",
      atBound: { op: "send", body: { $text: 128_000 }, options: { contentType: "text" } },
      pastBound: { op: "send", body: { $text: 128_001 }, options: { contentType: "text" } },
      stores: 1,
      message: "MessageSizeOutOfBounds: message is 128001 bytes; a message may be at most 128000 bytes (10204)",
    },
    {
      name: "sendBatch: message size 128000 bytes",
      atBound: { op: "sendBatch", messages: [{ body: "a", contentType: "text" }, { body: { $bytes: 128_000 }, contentType: "bytes" }] },
      pastBound: { op: "sendBatch", messages: [{ body: "a", contentType: "text" }, { body: { $bytes: 128_001 }, contentType: "bytes" }] },
      stores: 2,
      message: "MessageSizeOutOfBounds: messages[1] is 128001 bytes; a message may be at most 128000 bytes (10204)",
    },
    {
      name: "sendBatch: 100 messages",
      atBound: { op: "sendBatch", messages: Array.from({ length: 100 }, () => ({ body: "m", contentType: "text" })) },
      pastBound: { op: "sendBatch", messages: Array.from({ length: 101 }, () => ({ body: "m", contentType: "text" })) },
      stores: 100,
      message: "BatchCountOutOfBounds: the batch has 101 messages; a batch may have 1 to 100 messages (10206)",
    },
    {
      // Miniflare would take up to 288000; celld holds Cloudflare's documented 256 KB.
      name: "sendBatch: 256000 bytes of bodies",
      atBound: {
        op: "sendBatch",
        messages: [{ body: { $bytes: 128_000 }, contentType: "bytes" }, { body: { $bytes: 128_000 }, contentType: "bytes" }],
      },
      pastBound: {
        op: "sendBatch",
        messages: [
          { body: { $bytes: 128_000 }, contentType: "bytes" },
          { body: { $bytes: 128_000 }, contentType: "bytes" },
          { body: { $bytes: 1 }, contentType: "bytes" },
        ],
      },
      stores: 2,
      message:
        "BatchSizeOutOfBounds: the messages of the batch are 256001 bytes together; a batch may be at most 256000 bytes (10205)",
    },
    {
      name: "send: delaySeconds 86400",
      atBound: { op: "send", body: "d", options: { contentType: "text", delaySeconds: 86_400 } },
      pastBound: { op: "send", body: "d", options: { contentType: "text", delaySeconds: 86_401 } },
      stores: 1,
      message: "BatchDelayInvalid: delaySeconds must be from 0 to 86400 seconds, got 86401 (10202)",
    },
    {
      name: "sendBatch: batch delaySeconds 86400",
      atBound: { op: "sendBatch", messages: [{ body: "d", contentType: "text" }], options: { delaySeconds: 86_400 } },
      pastBound: { op: "sendBatch", messages: [{ body: "d", contentType: "text" }], options: { delaySeconds: 86_401 } },
      stores: 1,
      message: "BatchDelayInvalid: delaySeconds must be from 0 to 86400 seconds, got 86401 (10202)",
    },
    {
      name: "sendBatch: message delaySeconds 86400",
      atBound: { op: "sendBatch", messages: [{ body: "d", contentType: "text", delaySeconds: 86_400 }] },
      pastBound: { op: "sendBatch", messages: [{ body: "d", contentType: "text", delaySeconds: 86_401 }] },
      stores: 1,
      message: "BatchDelayInvalid: messages[0].delaySeconds must be from 0 to 86400 seconds, got 86401 (10202)",
    },
  ];

  for (const c of cases) {
    test(c.name, async () => {
      expect(await refusal("modern", c.pastBound)).toBe(c.message);
      expect(await stored()).toBe(0);
      await ok("modern", c.atBound);
      expect(await stored()).toBe(c.stores);
    });
  }

  test("a negative delay is refused the same way", async () => {
    expect(await refusal("modern", { op: "send", body: "d", options: { contentType: "text", delaySeconds: -1 } })).toBe(
      "BatchDelayInvalid: delaySeconds must be from 0 to 86400 seconds, got -1 (10202)",
    );
    expect(await stored()).toBe(0);
  });

  test("before queue_expose_error_codes, workerd reads the same words from the status text", async () => {
    expect(await refusal("legacy", { op: "send", body: { $text: 128_001 }, options: { contentType: "text" } })).toBe(
      "Queue send failed: MessageSizeOutOfBounds: message is 128001 bytes; a message may be at most 128000 bytes (10204)",
    );
    expect(
      await refusal("legacy", {
        op: "sendBatch",
        messages: Array.from({ length: 101 }, () => ({ body: "m", contentType: "text" })),
      }),
    ).toBe("Queue sendBatch failed: BatchCountOutOfBounds: the batch has 101 messages; a batch may have 1 to 100 messages (10206)");
    expect(await stored()).toBe(0);
  });
});

describe("delivery_delay", () => {
  test("is the delay of a send or batch that names none; an explicit delay overrides it", async () => {
    const { clock } = current();
    await ok("modern", { binding: "DELAYED", op: "send", body: "default", options: { contentType: "text" } });
    await ok("modern", { binding: "DELAYED", op: "send", body: "now", options: { contentType: "text", delaySeconds: 0 } });
    await ok("modern", {
      binding: "DELAYED",
      op: "sendBatch",
      messages: [{ body: "batch-default", contentType: "text" }, { body: "batch-5", contentType: "text", delaySeconds: 5 }],
    });
    expect((await takeAll("delayed")).map((m) => text(m.body))).toEqual(["now"]);
    clock.advance(5_000);
    expect((await takeAll("delayed")).map((m) => text(m.body))).toEqual(["batch-5"]);
    clock.advance(24_999);
    expect(await takeAll("delayed")).toEqual([]);
    clock.advance(1);
    expect((await takeAll("delayed")).map((m) => text(m.body)).sort()).toEqual(["batch-default", "default"]);
  });
});

describe("metrics", () => {
  test("send() and sendBatch() return the backlog after the call; metrics() reads it", async () => {
    const start = new Date(current().clock.now()).toISOString();
    expect(await ok("modern", { op: "metrics" })).toEqual({ backlogCount: 0, backlogBytes: 0 });
    expect(await ok("modern", { op: "send", body: "hello", options: { contentType: "text" } })).toEqual({
      metadata: { metrics: { backlogCount: 1, backlogBytes: 5, oldestMessageTimestamp: start } },
    });
    current().clock.advance(1_000);
    expect(
      await ok("modern", { op: "sendBatch", messages: [{ body: "ab", contentType: "text" }, { body: "c", contentType: "text" }] }),
    ).toEqual({ metadata: { metrics: { backlogCount: 3, backlogBytes: 8, oldestMessageTimestamp: start } } });
    expect(await ok("modern", { op: "metrics" })).toEqual({ backlogCount: 3, backlogBytes: 8, oldestMessageTimestamp: start });
  });
});

describe("overload", () => {
  test("with 256 producer calls in flight the next send is refused with 10250; only accepted sends are stored", async () => {
    const count = 300;
    let arrived = 0;
    let release!: () => void;
    const allArrived = new Promise<void>((resolve) => (release = resolve));
    // Every request waits until all have arrived, then all reach the cell in one turn of the event
    // loop, before its first commit: the cell sees `count` calls at once, deterministically.
    current().beforeCell = async () => {
      arrived += 1;
      if (arrived === count) release();
      await allArrived;
    };
    const results = (await ok("modern", { op: "flood", count })) as (string | null)[];
    current().beforeCell = undefined;

    const accepted = results.flatMap((r, i) => (r === null ? [i] : []));
    const refused = results.filter((r): r is string => r !== null);
    expect(accepted).toHaveLength(256);
    expect(new Set(refused)).toEqual(
      new Set(['QueueOverloaded: queue "jobs" is busy: 256 producer calls are in flight; retry shortly (10250)']),
    );
    expect(refused).toHaveLength(count - 256);
    const inCell = (await takeAll()).map((m) => (JSON.parse(text(m.body)) as { i: number }).i);
    expect(inCell.sort((a, b) => a - b)).toEqual(accepted);
  });
});
