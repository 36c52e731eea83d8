/**
 * How the dispatcher forms batches, on a real cell with a manual clock. The invoker is the seam
 * to workerd (what a Worker sees is covered end to end in test/queues-consumer.test.ts); here it
 * records each batch and acks it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, test } from "vitest";
import { CellRegistry, ManualClock, type QueueCell } from "@celld/queue-cell";
import { ConsumerDispatcher, type ConsumerSettings } from "../src/consumer-dispatcher.ts";
import type { BatchMessage } from "../src/consumer-message.ts";

let dir: string;
let clock: ManualClock;
let registry: CellRegistry;
let dispatcher: ConsumerDispatcher | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "celld-dispatcher-"));
  clock = new ManualClock();
  registry = new CellRegistry({ dataDir: dir, clock, durability: "normal" });
});

afterEach(async () => {
  await dispatcher?.stop();
  dispatcher = undefined;
  await registry.closeAll();
  rmSync(dir, { recursive: true, force: true });
});

const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));

async function start(settings: Partial<ConsumerSettings>): Promise<{ cell: QueueCell; batches: string[][] }> {
  const cell = await registry.open("jobs");
  const batches: string[][] = [];
  dispatcher = new ConsumerDispatcher({
    cell,
    clock,
    settings: { queue: "jobs", maxBatchSize: 10, maxBatchTimeoutSeconds: 5, maxConcurrency: 10, retryDelaySeconds: 0, wallTimeSeconds: 900, ...settings },
    invoke: async (_queue, messages: readonly BatchMessage[]) => {
      batches.push(messages.map((m) => Buffer.from(m.body).toString("utf8")));
      return { outcome: "ok", ackAll: true, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] };
    },
    log: { info: () => {}, warn: () => {}, error: () => {} },
  });
  dispatcher.start();
  await settle();
  return { cell, batches };
}

const send = (cell: QueueCell, ...bodies: string[]) =>
  cell.send(bodies.map((body) => ({ body: new TextEncoder().encode(body), contentType: "text" })));

test("a window longer than one lease's wait (20 s) still delivers once, at its end", async () => {
  const { cell, batches } = await start({ maxBatchSize: 5, maxBatchTimeoutSeconds: 45 });
  await send(cell, "a");
  await settle();
  clock.advance(20_000);
  await settle();
  await send(cell, "b");
  clock.advance(20_000);
  await settle();
  expect(batches).toEqual([]);
  await send(cell, "c");
  clock.advance(4_999);
  await settle();
  expect(batches).toEqual([]);
  clock.advance(1);
  await settle();
  expect(batches).toEqual([["a", "b", "c"]]);
});

test("a batch that fills is delivered at once, and what arrives meanwhile is left waiting, not leased", async () => {
  const { cell, batches } = await start({ maxBatchSize: 3, maxBatchTimeoutSeconds: 30 });
  await send(cell, "a");
  await settle();
  await send(cell, "b");
  await settle();
  expect(await cell.counts()).toMatchObject({ leased: 1, ready: 1 });
  await send(cell, "c", "d");
  await settle();
  expect(batches).toEqual([["a", "b", "c"]]);
  clock.advance(30_000);
  await settle();
  expect(batches).toEqual([["a", "b", "c"], ["d"]]);
});

test("with max_batch_timeout 0 each message goes at once, in a batch of what is there", async () => {
  const { cell, batches } = await start({ maxBatchSize: 3, maxBatchTimeoutSeconds: 0 });
  await send(cell, "a");
  await settle();
  await send(cell, "b", "c", "d", "e");
  await settle();
  expect(batches.flat()).toEqual(["a", "b", "c", "d", "e"]);
  expect(batches[0]).toEqual(["a"]);
  expect(batches.every((b) => b.length <= 3)).toBe(true);
});
