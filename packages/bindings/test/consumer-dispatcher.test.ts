/**
 * How the dispatcher forms batches, on a real cell with a manual clock. The invoker is the seam
 * to workerd (what a Worker sees is covered end to end in test/queues-consumer.test.ts); here it
 * records each batch and acks it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, onTestFinished, test } from "vitest";
import { CellError, CellRegistry, ManualClock, isCellError, type QueueCell } from "@celld/queue-cell";
import type { QueueHandlerResult } from "../src/batch-outcome.ts";
import { BatchNotDeliveredError, ConsumerDispatcher, type ConsumerSettings, type QueueInvoker } from "../src/consumer-dispatcher.ts";
import type { BatchMessage } from "../src/consumer-message.ts";
import { InFlightBudget } from "../src/in-flight-budget.ts";

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

// A pause for the dispatcher's own async steps (cell commits, the next lease). Checks of what it
// leads to poll (expect.poll) rather than trust 20 ms, which a loaded machine does not honour.
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));

/**
 * Waits (real time) until `check` holds. For what the dispatcher does after a write of its own
 * commits: a test that reads the cell can see the write before the dispatcher has gone on, and on
 * a loaded machine settle()'s 20 ms did not cover the gap.
 */
async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

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
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 1, ready: 1 });
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

/** A dispatcher on `queue` whose handler holds each batch until the test lets it go. */
async function holding(queue: string, budget: InFlightBudget, settings: Partial<ConsumerSettings>, errors: string[] = []) {
  const cell = await registry.open(queue);
  const held: Array<() => void> = [];
  const d = new ConsumerDispatcher({
    cell,
    clock,
    budget,
    settings: { queue, maxBatchSize: 1, maxBatchTimeoutSeconds: 0, maxConcurrency: 10, retryDelaySeconds: 0, wallTimeSeconds: 900, ...settings },
    invoke: () =>
      new Promise((resolve) =>
        held.push(() => resolve({ outcome: "ok", ackAll: true, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] })),
      ),
    log: { info: () => {}, warn: () => {}, error: (message) => errors.push(message) },
  });
  extra.push(d);
  d.start();
  return { cell, held, dispatcher: d };
}
const extra: ConsumerDispatcher[] = [];
afterEach(async () => {
  await Promise.all(extra.splice(0).map((d) => d.stop()));
});

const bodyOf = (bytes: number): string => "x".repeat(bytes);

test("batches stop starting once the bytes in flight reach the budget, and start again as they settle", async () => {
  const budget = new InFlightBudget(3_000);
  const { cell, held, dispatcher: d } = await holding("big", budget, { maxConcurrency: 10 });
  await send(cell, ...Array.from({ length: 8 }, () => bodyOf(1_000)));
  await settle();
  // 0, 1,000 and 2,000 bytes in flight were under the budget; at 3,000 the next waits, unleased.
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(3);
  expect(budget.bytes).toBe(3_000);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 3, ready: 5 });
  held.shift()!();
  await settle();
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(3);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 3, ready: 4 });
  while (held.length > 0) {
    held.shift()!();
    await settle();
  }
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 0, ready: 0 });
  expect(budget.bytes).toBe(0);
});

test("a batch larger than the whole budget still runs, alone", async () => {
  const budget = new InFlightBudget(500);
  const { cell, held, dispatcher: d } = await holding("huge", budget, { maxBatchSize: 2 });
  await send(cell, bodyOf(1_000), bodyOf(1_000), bodyOf(1_000));
  await settle();
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(1);
  expect(budget.bytes).toBe(2_000);
  held.shift()!();
  await settle();
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(1);
  held.shift()!();
  await settle();
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 0, ready: 0 });
});

test("consumers share one budget; one with nothing running still starts a batch, and is woken by another's room", async () => {
  const budget = new InFlightBudget(2_000);
  const big = await holding("big", budget, {});
  await send(big.cell, bodyOf(1_000), bodyOf(1_000), bodyOf(1_000));
  await until(() => big.dispatcher.batchesInFlight === 2, "two batches of big");
  await settle();
  expect(big.dispatcher.batchesInFlight).toBe(2);
  // The budget is full, but "small" runs nothing yet: it may start one batch, and only one.
  const small = await holding("small", budget, {});
  await send(small.cell, "a", "b");
  await until(() => small.dispatcher.batchesInFlight === 1, "a batch of small");
  await settle();
  expect(small.dispatcher.batchesInFlight).toBe(1);
  expect(await small.cell.counts()).toMatchObject({ leased: 1, ready: 1 });
  // Room that "big" gives wakes "small", which takes its next batch before "big" takes its third.
  big.held.shift()!();
  await until(() => small.dispatcher.batchesInFlight === 2, "a second batch of small");
  await settle();
  expect(small.dispatcher.batchesInFlight).toBe(2);
  expect(await small.cell.counts()).toMatchObject({ leased: 2, ready: 0 });
});

test("stop() ends a wait for room at once", async () => {
  const budget = new InFlightBudget(1_000);
  const { cell, held, dispatcher: d } = await holding("big", budget, {});
  await send(cell, bodyOf(1_000), bodyOf(1_000));
  await settle();
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(1);
  // Its running batch never settles: only stop() can end the wait (and it hands the batch back).
  await d.stop();
  expect(held).toHaveLength(1);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 0, ready: 2 });
}, 10_000);

/** Starts `dispatcher` on `cell` with batches of up to 10 sent at once; returns its error log. */
function startFailing(cell: QueueCell, invoke: QueueInvoker, settings: Partial<ConsumerSettings> = {}, infos: string[] = []): string[] {
  const errors: string[] = [];
  dispatcher = new ConsumerDispatcher({
    cell,
    clock,
    settings: { queue: "jobs", maxBatchSize: 10, maxBatchTimeoutSeconds: 0, maxConcurrency: 10, retryDelaySeconds: 0, wallTimeSeconds: 900, ...settings },
    invoke,
    // A storage failure's line carries its cause, and no error object to print a stack of at every retry.
    log: {
      info: (message) => infos.push(message),
      warn: () => {},
      error: (message, error) => errors.push(isCellError(error, "ERR_STORAGE") ? `${message} [and its stack]` : message),
    },
  });
  dispatcher.start();
  return errors;
}

test("a handler that could not be run costs no attempt: the batch goes back and the consumer backs off", async () => {
  // One delivery allowed, then deletion: counted as deliveries, the failures would delete the message.
  const cell = await registry.open("jobs", { maxDeliveries: 1, deadLetter: { kind: "delete" } });
  const invoked: Array<{ at: number; attempts: number[] }> = [];
  let unreachable = 2;
  const errors = startFailing(cell, async (_queue, messages) => {
    invoked.push({ at: clock.now(), attempts: messages.map((m) => m.deliveries) });
    if (unreachable-- > 0) throw new BatchNotDeliveredError("connect ECONNREFUSED 127.0.0.1:1");
    return { outcome: "ok", ackAll: true, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] };
  });
  const start = clock.now();
  await send(cell, "a");
  await settle();
  // Logged after the release commits.
  await until(() => errors.length === 1, "the first error");
  expect(invoked).toEqual([{ at: start, attempts: [1] }]);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ ready: 1, leased: 0 });
  expect(errors).toEqual([
    'queue "jobs": the queue() handler could not be run; its 1 message(s) are back in the queue, their attempt not counted; the next batch in 1 s',
  ]);

  clock.advance(999);
  await settle();
  expect(invoked).toHaveLength(1);
  clock.advance(1);
  await settle();
  await until(() => errors.length === 2, "the second error");
  // Still its first attempt; the wait doubles.
  expect(invoked[1]).toEqual({ at: start + 1_000, attempts: [1] });
  expect(errors[1]).toMatch(/the next batch in 2 s$/);
  clock.advance(1_999);
  await settle();
  expect(invoked).toHaveLength(2);
  clock.advance(1);
  await settle();
  expect(invoked[2]).toEqual({ at: start + 3_000, attempts: [1] });
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ ready: 0, leased: 0 });
});

test("a batch whose answer never came (workerd died while it ran) counts as a failed delivery", async () => {
  const cell = await registry.open("jobs", { maxDeliveries: 2, deadLetter: { kind: "delete" } });
  const attempts: number[][] = [];
  const errors = startFailing(cell, async (_queue, messages) => {
    attempts.push(messages.map((m) => m.deliveries));
    // What undici says when the other side closes mid-request: the handler may have run.
    throw Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" });
  });
  await send(cell, "poison");
  await settle();
  // Retried at once, no back-off; after its second delivery it is gone (max deliveries 2).
  expect(attempts).toEqual([[1], [2]]);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ ready: 0, leased: 0 });
  expect(errors).toEqual([
    'queue "jobs": the queue() handler did not answer (workerd may have ended while it ran) and counts as a failed delivery; 1 of 1 message(s) will be retried',
    'queue "jobs": the queue() handler did not answer (workerd may have ended while it ran) and counts as a failed delivery; 0 of 1 message(s) will be retried; 1 had no retries left and was deleted (the consumer names no dead_letter_queue)',
  ]);
});

test("a batch cut off as the host stops is handed back uncounted, unless workerd died under it", async () => {
  for (const workerdDied of [false, true]) {
    const queue = workerdDied ? "died" : "stopped";
    const cell = await registry.open(queue);
    let cutOff: (error: Error) => void = () => {};
    const d = new ConsumerDispatcher({
      cell,
      clock,
      settings: { queue, maxBatchSize: 10, maxBatchTimeoutSeconds: 0, maxConcurrency: 10, retryDelaySeconds: 0, wallTimeSeconds: 900 },
      invoke: () => new Promise((_resolve, reject) => (cutOff = reject)),
      log: { info: () => {}, warn: () => {}, error: () => {} },
    });
    d.start();
    await send(cell, "x");
    await settle();
    await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 1 });
    if (workerdDied) d.runtimeExited();
    // The host stops first; the batch's connection breaks after (Ctrl-C reaches workerd too).
    const stopping = d.stop(5_000);
    cutOff(Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }));
    await stopping;
    const [m] = await cell.lease({ max: 1 });
    // This lease's delivery, plus the cut-off one if it counted.
    expect({ workerdDied, deliveries: m?.deliveries }).toEqual({ workerdDied, deliveries: workerdDied ? 2 : 1 });
  }
});

/** Counts the cell's lease calls, and the most that were waiting for an answer at once. */
function countLeases(cell: QueueCell): { calls: number; mostAtOnce: number } {
  const seen = { calls: 0, mostAtOnce: 0 };
  let open = 0;
  const lease = cell.lease.bind(cell);
  cell.lease = async (options) => {
    seen.calls += 1;
    seen.mostAtOnce = Math.max(seen.mostAtOnce, ++open);
    try {
      return await lease(options);
    } finally {
      open -= 1;
    }
  };
  return seen;
}

const sendMany = (cell: QueueCell, count: number, bytes = 10) =>
  send(cell, ...Array.from({ length: count }, (_, i) => `${i}`.padStart(bytes, "0")));

/** `count` messages of `bytes` each wait on `queue`; then a holding dispatcher starts there. */
/** A dispatcher started on a backlog, once it has `inFlight` batches running (its leases are in turn). */
async function backlogged(queue: string, count: number, settings: Partial<ConsumerSettings>, budget: InFlightBudget, inFlight: number, bytes = 10) {
  const cell = await registry.open(queue);
  const leases = countLeases(cell);
  await sendMany(cell, count, bytes);
  const started = await holding(queue, budget, settings);
  await until(() => started.dispatcher.batchesInFlight >= inFlight, `${inFlight} batches in flight`);
  await settle();
  return { ...started, leases };
}

test("with a backlog of full batches, up to four are leased together and run at once", async () => {
  const { cell, held, dispatcher: d, leases } = await backlogged("backlog", 100, { maxBatchSize: 10, maxConcurrency: 10 }, new InFlightBudget(1_000_000), 10);
  // The first lease finds no batch size to go by: it goes alone. Then four at a time, up to ten.
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(10);
  expect(leases.mostAtOnce).toBe(4);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 100, ready: 0 });
  while (held.length > 0) {
    held.shift()!();
    await settle();
  }
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 0, ready: 0 });
});

test("batches leased together are never more than the free slots, and only full ones", async () => {
  const { cell, held, dispatcher: d, leases } = await backlogged("slots", 35, { maxBatchSize: 10, maxConcurrency: 3 }, new InFlightBudget(1_000_000), 3);
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(3);
  expect(leases.mostAtOnce).toBe(2);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 30, ready: 5 });
  // One slot frees: 5 are left, less than a batch, so one lease waits for the window (0 s here).
  held.shift()!();
  await settle();
  expect(leases.mostAtOnce).toBe(2);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 25, ready: 0 });
});

test("batches leased together fit the in-flight budget, judged by the last batch's bytes a message", async () => {
  const budget = new InFlightBudget(2_500);
  // Batches of 5 messages of 100 bytes: 500 bytes each, so the budget has room for five.
  const { cell, dispatcher: d, leases } = await backlogged("sized", 50, { maxBatchSize: 5, maxConcurrency: 10 }, budget, 5, 100);
  // One alone (no size known yet), then four together: 2,500 bytes, and no room for more.
  expect(leases.mostAtOnce).toBe(4);
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(5);
  expect(budget.bytes).toBe(2_500);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 25, ready: 25 });
});

test("a batch leased alongside that comes back short is handed back, its attempt not counted", async () => {
  const budget = new InFlightBudget(1_000_000);
  const cell = await registry.open("short");
  await sendMany(cell, 30);
  // Something else leases 15 between the dispatcher's look at the backlog and its leases.
  const readyCount = cell.readyCount.bind(cell);
  let other: Promise<unknown[]> | undefined;
  cell.readyCount = (atMost) => {
    const answer = readyCount(atMost);
    other ??= cell.lease({ max: 15, visibilityTimeoutSeconds: 3_600 });
    return answer;
  };
  const { dispatcher: d } = await holding("short", budget, { maxBatchSize: 10, maxBatchTimeoutSeconds: 30, maxConcurrency: 10 });
  await settle();
  // The first batch (10) went alone; then 20 looked ready, and the extra lease found 5. It gave
  // them back rather than run a short batch: the next batch took them and waits out its window.
  expect(await other).toHaveLength(15);
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(1);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 30, ready: 0 });
  clock.advance(30_000);
  await settle();
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(2);
  await d.stop();
  const handedBack = await cell.lease({ max: 100 });
  // The other 15 are still leased. No delivery by the dispatcher counted (the short lease's
  // neither), so this lease is each message's first.
  expect(handedBack).toHaveLength(15);
  expect(handedBack.map((m) => m.deliveries)).toEqual(Array.from({ length: 15 }, () => 1));
});

const ok = (): QueueHandlerResult => ({ outcome: "ok", ackAll: true, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] });
const textOf = (messages: readonly BatchMessage[]): string[] => messages.map((m) => Buffer.from(m.body).toString("utf8"));
const storageFailed = (): CellError => new CellError("ERR_STORAGE", "the queue's storage failed: injected");

/** Unhandled rejections while the test runs: one ends a Node 20 host. */
function unhandledRejections(): unknown[] {
  const seen: unknown[] = [];
  const listener = (reason: unknown): void => void seen.push(reason);
  process.on("unhandledRejection", listener);
  onTestFinished(() => void process.off("unhandledRejection", listener));
  return seen;
}

/** The cell's `method` rejects while `failing()` says so; otherwise it is the cell's own. */
function failWhile<K extends "lease" | "settle">(cell: QueueCell, method: K, failing: () => boolean): void {
  const real = (cell[method] as (...args: unknown[]) => Promise<unknown>).bind(cell);
  (cell as unknown as Record<K, unknown>)[method] = (...args: unknown[]) => (failing() ? Promise.reject(storageFailed()) : real(...args));
}

test("a settle that fails is logged, not thrown: the consumer goes on, and the batch comes back when its lease runs out", async () => {
  const unhandled = unhandledRejections();
  const cell = await registry.open("jobs");
  let settleFailures = 1;
  failWhile(cell, "settle", () => settleFailures-- > 0);
  const seen: Array<{ body: string; attempt: number }> = [];
  const errors = startFailing(cell, async (_queue, messages) => {
    seen.push(...messages.map((m) => ({ body: Buffer.from(m.body).toString("utf8"), attempt: m.deliveries })));
    return ok();
  });
  await send(cell, "a");
  await settle();
  expect(unhandled).toEqual([]);
  expect(errors).toEqual([
    'queue "jobs": the outcome of the queue() handler could not be recorded; its 1 message(s) stay leased until the lease ends, ' +
      "within 960 s, and then come back, that delivery counted as failed: the queue's storage failed: injected",
  ]);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 1, ready: 0 });
  await send(cell, "b");
  await settle();
  expect(seen).toEqual([{ body: "a", attempt: 1 }, { body: "b", attempt: 1 }]);
  // The lease is 0 s of window + 900 s of wall time + 60 s of slack.
  clock.advance(960_000);
  await settle();
  expect(seen).toEqual([{ body: "a", attempt: 1 }, { body: "b", attempt: 1 }, { body: "a", attempt: 2 }]);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 0, ready: 0 });
});

test("a lease that fails is logged and tried again after 1 s, doubling, and a lease that works resets the wait", async () => {
  const cell = await registry.open("jobs");
  let leaseFailures = 2;
  failWhile(cell, "lease", () => leaseFailures-- > 0);
  const batches: string[][] = [];
  const errors = startFailing(cell, async (_queue, messages) => {
    batches.push(textOf(messages));
    return ok();
  });
  await settle();
  expect(errors).toEqual(['queue "jobs": could not take the next batch from the queue; trying again in 1 s: the queue\'s storage failed: injected']);
  await send(cell, "a");
  clock.advance(999);
  await settle();
  expect(errors).toHaveLength(1);
  clock.advance(1);
  await settle();
  expect(errors[1]).toBe('queue "jobs": could not take the next batch from the queue; trying again in 2 s: the queue\'s storage failed: injected');
  expect(batches).toEqual([]);
  clock.advance(1_999);
  await settle();
  expect(batches).toEqual([]);
  clock.advance(1);
  await settle();
  expect(batches).toEqual([["a"]]);

  // The long poll after "a" ends empty (20 s), and the lease after it fails: 1 s again.
  leaseFailures = 1;
  clock.advance(20_000);
  await settle();
  expect(errors.slice(2)).toEqual(['queue "jobs": could not take the next batch from the queue; trying again in 1 s: the queue\'s storage failed: injected']);
  await send(cell, "b");
  clock.advance(1_000);
  await settle();
  expect(batches).toEqual([["a"], ["b"]]);
});

test("stop() ends the wait after a failed lease at once", async () => {
  const cell = await registry.open("jobs");
  failWhile(cell, "lease", () => true);
  const errors = startFailing(cell, async () => ok());
  await settle();
  expect(errors).toHaveLength(1);
  await dispatcher!.stop();
  dispatcher = undefined;
  clock.advance(60_000);
  await settle();
  expect(errors).toHaveLength(1);
}, 10_000);

test("a batch leased beside one whose lease fails is still run, and the rest follow after the wait", async () => {
  const cell = await registry.open("beside");
  await sendMany(cell, 30);
  // Lease 1 takes the first batch alone; then the second turn's extra lease (asked first) fails.
  let leases = 0;
  failWhile(cell, "lease", () => ++leases === 2);
  const errors: string[] = [];
  const { dispatcher: d } = await holding("beside", new InFlightBudget(1_000_000), { maxBatchSize: 10, maxConcurrency: 10 }, errors);
  await settle();
  expect(leases).toBeGreaterThanOrEqual(3);
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(2);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 20, ready: 10 });
  expect(errors).toEqual(['queue "beside": could not take the next batch from the queue; trying again in 1 s: the queue\'s storage failed: injected']);
  clock.advance(1_000);
  await settle();
  await expect.poll(() => d.batchesInFlight, { timeout: 5_000 }).toBe(3);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 30, ready: 0 });
});

test("a batch whose filling lease fails goes out with what it holds", async () => {
  const cell = await registry.open("jobs");
  // Lease 1 (the long poll) takes "a"; lease 2 would fill the batch for its 30 s window, and fails.
  let leases = 0;
  failWhile(cell, "lease", () => ++leases === 2);
  const batches: string[][] = [];
  const errors = startFailing(
    cell,
    async (_queue, messages) => {
      batches.push(textOf(messages));
      return ok();
    },
    { maxBatchSize: 3, maxBatchTimeoutSeconds: 30 },
  );
  await send(cell, "a");
  await settle();
  expect(batches).toEqual([["a"]]);
  expect(errors).toEqual(['queue "jobs": could not take the next batch from the queue; trying again in 1 s: the queue\'s storage failed: injected']);
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ leased: 0, ready: 0 });
});

test("an invocation that outlives the wall time has its signal aborted, and counts as one failed delivery", async () => {
  const cell = await registry.open("jobs");
  const calls: Array<{ attempts: number[]; signal: AbortSignal | undefined }> = [];
  startFailing(
    cell,
    (_queue, messages, _metadata, signal) => {
      calls.push({ attempts: messages.map((m) => m.deliveries), signal });
      return new Promise(() => {});
    },
    { wallTimeSeconds: 60 },
  );
  await send(cell, "slow");
  await settle();
  expect(calls).toHaveLength(1);
  expect(calls[0]?.signal?.aborted).toBe(false);
  clock.advance(59_999);
  await settle();
  expect(calls[0]?.signal?.aborted).toBe(false);
  clock.advance(1);
  await settle();
  expect(calls[0]?.signal?.aborted).toBe(true);
  // Retried at once (retry delay 0), as its second delivery, with a signal of its own.
  expect(calls.map((c) => c.attempts)).toEqual([[1], [2]]);
  expect(calls[1]?.signal?.aborted).toBe(false);
});

test("stop() aborts the signal of an invocation still running after the grace period, and hands its batch back", async () => {
  const cell = await registry.open("jobs");
  const signals: Array<AbortSignal | undefined> = [];
  const infos: string[] = [];
  startFailing(
    cell,
    (_queue, _messages, _metadata, signal) => {
      signals.push(signal);
      return new Promise(() => {});
    },
    {},
    infos,
  );
  await send(cell, "x");
  await settle();
  expect(signals).toHaveLength(1);
  expect(signals[0]?.aborted).toBe(false);
  await dispatcher!.stop();
  dispatcher = undefined;
  expect(signals[0]?.aborted).toBe(true);
  expect(infos).toEqual(['queue "jobs": 1 message(s) still in queue() handlers at shutdown handed back, their delivery not counted']);
  const [m] = await cell.lease({ max: 1 });
  expect(m?.deliveries).toBe(1);
});

test("a queue reopened on a clock behind its messages' times still ends a batch window after max_batch_timeout", async () => {
  const first = await registry.open("jobs");
  await send(first, "old");
  await registry.closeAll();
  // celld restarted with its clock three hours slow: the cell's time goes on from its newest
  // message, ahead of the clock; the window is measured in the cell's time, as availableAt is.
  clock = new ManualClock(clock.now() - 3 * 3_600_000);
  registry = new CellRegistry({ dataDir: dir, clock, durability: "normal" });
  const { batches } = await start({ maxBatchSize: 5, maxBatchTimeoutSeconds: 5 });
  clock.advance(4_999);
  await settle();
  expect(batches).toEqual([]);
  clock.advance(1);
  await settle();
  expect(batches).toEqual([["old"]]);
});

test("paused delivery starts no batch, hands back what a waiting lease took, and resumes at once", async () => {
  const { cell, batches } = await start({ maxBatchSize: 2, maxBatchTimeoutSeconds: 0 });
  await send(cell, "a");
  await until(() => batches.length === 1, "the first batch");
  // Paused while the dispatcher waits in a lease: the message that lease takes goes back uncounted.
  await cell.configure({ deliveryPaused: true });
  await send(cell, "b");
  await settle();
  clock.advance(60_000);
  await settle();
  expect(batches).toEqual([["a"]]);
  await until(() => true, "nothing");
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ ready: 1, leased: 0 });
  await send(cell, "c");
  await settle();
  expect(batches).toEqual([["a"]]);
  await cell.configure({ deliveryPaused: false });
  await until(() => batches.flat().length === 3, "the batches after resume");
  expect(batches.slice(1).flat().sort()).toEqual(["b", "c"]);
  // Each went once: the lease handed back during the pause was not a delivery.
  await expect.poll(() => cell.counts(), { timeout: 5_000 }).toMatchObject({ ready: 0, leased: 0, dead: 0 });
});

test("a cell that closes under the dispatcher (its worker thread ended) is opened again through reopen, and delivery goes on", async () => {
  const first = await registry.open("jobs");
  const batches: string[][] = [];
  const lines: string[] = [];
  const reopened: QueueCell[] = [];
  dispatcher = new ConsumerDispatcher({
    cell: first,
    reopen: async () => {
      const cell = await registry.open("jobs");
      reopened.push(cell);
      return cell;
    },
    clock,
    settings: { queue: "jobs", maxBatchSize: 10, maxBatchTimeoutSeconds: 0, maxConcurrency: 1, retryDelaySeconds: 0, wallTimeSeconds: 900 },
    invoke: async (_queue, messages: readonly BatchMessage[]) => {
      batches.push(messages.map((m) => Buffer.from(m.body).toString("utf8")));
      return { outcome: "ok", ackAll: true, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] };
    },
    log: { info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) },
  });
  dispatcher.start();
  await send(first, "a");
  await until(() => batches.length === 1, "the first batch");
  // As a dead thread leaves it: closed, while the dispatcher's long poll waits on it.
  await registry.close("jobs");
  await until(() => reopened.length === 1, "the cell opened again");
  expect(reopened[0]).not.toBe(first);
  expect(lines).toContain('queue "jobs": its cell closed under the consumer (a cell thread ended?); opened again');
  await send(reopened[0]!, "b");
  await until(() => batches.length === 2, "the batch after the reopen");
  expect(batches).toEqual([["a"], ["b"]]);
  await until(() => reopened[0]!.committedCounts().leased === 0, "b acked");
  expect(reopened[0]!.committedCounts()).toMatchObject({ ready: 0, leased: 0 });
});

test("a cell that closes while delivery is paused is opened again within 5 s, and the resume on the new one delivers", async () => {
  const first = await registry.open("jobs");
  await first.configure({ deliveryPaused: true });
  const batches: string[][] = [];
  const reopened: QueueCell[] = [];
  dispatcher = new ConsumerDispatcher({
    cell: first,
    reopen: async () => {
      const cell = await registry.open("jobs");
      reopened.push(cell);
      return cell;
    },
    clock,
    settings: { queue: "jobs", maxBatchSize: 10, maxBatchTimeoutSeconds: 0, maxConcurrency: 1, retryDelaySeconds: 0, wallTimeSeconds: 900 },
    invoke: async (_queue, messages: readonly BatchMessage[]) => {
      batches.push(messages.map((m) => Buffer.from(m.body).toString("utf8")));
      return { outcome: "ok", ackAll: true, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] };
    },
    log: { info: () => {}, warn: () => {}, error: () => {} },
  });
  dispatcher.start();
  await settle();
  // Closed under the paused wait, as a dead thread leaves it: no resume will ever come from it.
  await registry.close("jobs");
  clock.advance(4_999);
  await settle();
  expect(reopened).toHaveLength(0);
  clock.advance(1);
  await until(() => reopened.length === 1, "the cell opened again");
  // Still paused (the file says so): the resume goes to the new cell, and wakes the dispatcher.
  await send(reopened[0]!, "a");
  await settle();
  expect(batches).toEqual([]);
  await reopened[0]!.configure({ deliveryPaused: false });
  await until(() => batches.length === 1, "the batch after the resume");
  expect(batches).toEqual([["a"]]);
});
