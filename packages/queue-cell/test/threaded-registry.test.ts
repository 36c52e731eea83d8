import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, onTestFinished, test } from "vitest";
import {
  BackgroundWorkError,
  CellError,
  CellRegistry,
  ManualClock,
  ThreadedCellRegistry,
  emptyTally,
  isCellError,
  limits,
  systemClock,
  type CellTally,
  type ThreadedCellRegistryOptions,
} from "../src/index.ts";
import { ownerOf } from "../src/threads/owner-hash.ts";
import { fromErrorData, toErrorData } from "../src/threads/error-transport.ts";
import { packStrings, unpackStrings } from "../src/threads/message-columns.ts";
import { bodies, refs, text } from "./cell-harness.ts";
import { tempDir } from "./temp-dir.ts";

// Real worker threads, real SQLite files and the system clock: a clock object cannot cross
// threads. Waits are on real events (answers, polls of a mirror), never on fixed sleeps.

function threaded(options: Partial<ThreadedCellRegistryOptions> & { dataDir?: string } = {}): ThreadedCellRegistry {
  const registry = new ThreadedCellRegistry({ dataDir: options.dataDir ?? tempDir(), threads: 2, durability: "off", ...options });
  onTestFinished(() => registry.closeAll());
  return registry;
}

/** Names of queues that the given thread of `threads` owns, the first `count` of q-0, q-1, ... */
function namesOn(thread: number, threads: number, count: number, prefix = "q"): string[] {
  const names: string[] = [];
  for (let i = 0; names.length < count; i++) if (ownerOf(`${prefix}-${i}`, threads) === thread) names.push(`${prefix}-${i}`);
  return names;
}

async function until(check: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test("send, lease, ack, nack, settle and release round trip through a cell thread", async () => {
  const registry = threaded();
  const cell = await registry.open("orders");
  expect(await registry.open("orders")).toBe(cell);
  const sent = await cell.send([text("a"), text("b"), text("c"), text("d")]);
  expect(sent.ids).toHaveLength(4);
  expect(sent.metrics.backlogCount).toBe(4);
  expect(cell.committedCounts().ready).toBe(4);
  expect(cell.readyCount(100)).toBe(4);
  const leased = await cell.lease({ max: 4, visibilityTimeoutSeconds: 60 });
  expect(bodies(leased)).toEqual(["a", "b", "c", "d"]);
  expect(Buffer.isBuffer(leased[0]!.body)).toBe(true);
  const [a, b, c, d] = refs(leased);
  expect(await cell.ack([a!])).toMatchObject({ acked: 1, staleLeases: [] });
  expect(await cell.nack([{ ...b!, delaySeconds: 0 }])).toMatchObject({ retried: 1 });
  expect(await cell.settle({ acks: [c!], nacks: [] })).toMatchObject({ acked: 1 });
  expect(await cell.release([d!])).toEqual({ released: 1, staleLeases: [] });
  const again = await cell.lease({ max: 10 });
  expect(bodies(again).sort()).toEqual(["b", "d"]);
  await cell.ack(refs(again));
  expect(await cell.counts()).toMatchObject({ ready: 0, leased: 0, dead: 0 });
  expect(cell.committedCounts()).toMatchObject({ ready: 0, leased: 0 });
  expect(await cell.backlogMetrics()).toMatchObject({ backlogCount: 0 });
  // Each thread's systemClock starts from its own reading of the wall clock: a ms or so apart.
  expect(Math.abs(cell.now() - systemClock.now())).toBeLessThanOrEqual(2);
});

test("calls made in one turn cross together and commit as one group: one flush for all", async () => {
  let flushes = 0;
  const registry = threaded({ durability: "full", onFileSynced: () => (flushes += 1) });
  const cell = await registry.open("turn");
  await cell.send([text("first")]);
  await until(() => flushes >= 1, "the first flush to be told");
  const before = flushes;
  // Five sends in one group, each answered send making another, as a producer awaiting each call
  // does. Their answers come back together and the five next sends go out together: one group
  // and one flush for each five. Posted one by one, the thread woke at the first next send and
  // committed it alone, the others waiting behind its flush for groups of their own.
  const chains = Array.from({ length: 5 }, async (_, i) => {
    await cell.send([text(`a${i}`)]);
    await cell.send([text(`b${i}`)]);
  });
  await Promise.all(chains);
  await until(() => flushes >= before + 2, "the flushes to be told");
  expect(flushes - before).toBe(2);
  expect(await cell.counts()).toMatchObject({ ready: 11 });
});

test("a call that cannot cross fails alone; the calls of its turn go through", async () => {
  const registry = threaded();
  const cell = await registry.open("clone");
  const bad = cell.configure({ maxDeliveries: (() => 1) as unknown as number });
  const good = cell.send([text("a")]);
  await expect(bad).rejects.toThrow(/could not be cloned/);
  expect((await good).ids).toHaveLength(1);
  expect(await cell.counts()).toMatchObject({ ready: 1 });
});

test("a refusal on the thread arrives as the same CellError, code and fields", async () => {
  const registry = threaded();
  const cell = await registry.open("q");
  const tooMany = await cell.lease({ max: limits.leaseMessagesMax + 1 }).catch((error: unknown) => error);
  expect(tooMany).toBeInstanceOf(CellError);
  expect(isCellError(tooMany, "ERR_OUT_OF_RANGE")).toBe(true);
  const local = new CellRegistry({ dataDir: tempDir(), durability: "off" });
  const localCell = await local.open("q");
  const localRefusal = (await localCell.lease({ max: limits.leaseMessagesMax + 1 }).catch((error: unknown) => error)) as CellError;
  await local.closeAll();
  expect((tooMany as CellError).message).toBe(localRefusal.message);
  expect((tooMany as CellError).field).toBe(localRefusal.field);
  expect((tooMany as CellError).bound).toBe(localRefusal.bound);
  expect((tooMany as CellError).name).toBe(localRefusal.name);

  await cell.send([text("m")]);
  const [m] = await cell.lease({ max: 1 });
  await cell.ack(refs([m!]));
  // A stale ack is no error: it comes back among staleLeases, as locally.
  expect(await cell.ack(refs([m!]))).toMatchObject({ acked: 0, staleLeases: [{ id: m!.id }] });
  const empty = await cell.send([]).catch((error: unknown) => error);
  expect(isCellError(empty, "ERR_BATCH_COUNT")).toBe(true);
  expect((empty as CellError).retryable).toBe(false);
  await expect(cell.send([text("x")], { trace: { groupStarted() {}, committed() {} } })).rejects.toThrow(TypeError);
  // Malformed messages cross as they are and are refused in the cell's own words.
  const notBytes = await cell.send([{ body: "text" as unknown as Uint8Array, contentType: "text" }]).catch((error: unknown) => error);
  expect(isCellError(notBytes, "ERR_INVALID")).toBe(true);
  expect((notBytes as CellError).message).toBe("messages[0].body must be bytes");
  const tooLarge = await cell.send([{ body: new Uint8Array(limits.messageBytesMax + 1), contentType: "bytes" }]).catch((error: unknown) => error);
  expect(isCellError(tooLarge, "ERR_MESSAGE_TOO_LARGE")).toBe(true);
});

test("refs cross as columns: nack delays, settle of both, and a malformed ref refused as locally", async () => {
  const registry = threaded();
  const cell = await registry.open("q");
  await cell.send([text("a"), text("b"), text("c"), text("d")]);
  const [a, b, c, d] = refs(await cell.lease({ max: 4 }));
  expect(await cell.settle({ acks: [a!], nacks: [{ ...b!, delaySeconds: 600 }, { ...c!, delaySeconds: 0 }] })).toMatchObject({ acked: 1, retried: 2 });
  expect(await cell.counts()).toMatchObject({ ready: 1, delayed: 1, leased: 1 });
  // The mirror's counts, read in the settle's own group: the same.
  expect(cell.committedCounts()).toMatchObject({ ready: 1, delayed: 1, leased: 1 });
  expect(await cell.release([d!, a!])).toEqual({ released: 1, staleLeases: [a] });
  const local = new CellRegistry({ dataDir: tempDir(), durability: "off" });
  const localCell = await local.open("q");
  for (const bad of [[{ id: 7, leaseGeneration: 1 }], [{ id: "x", leaseGeneration: "1" }], [{ id: "x", leaseGeneration: 1, delaySeconds: "soon" }]]) {
    const there = await cell.nack(bad as never).catch((error: unknown) => error);
    const here = await localCell.nack(bad as never).catch((error: unknown) => error);
    expect(there).toBeInstanceOf(CellError);
    expect((there as CellError).message).toBe((here as CellError).message);
  }
  await local.closeAll();
});

test("a send's messages cross as columns with every field, and come back the same", async () => {
  const registry = threaded();
  const cell = await registry.open("q");
  const source = Buffer.from("xxhelloyyworldzz");
  await cell.send([
    { body: source.subarray(2, 7), contentType: "text" },
    { body: new Uint8Array(0), contentType: "bytes", attributes: '{"a":1}', sentAt: 1_700_000_000_000 },
    { body: source.subarray(9, 14), contentType: "json", delaySeconds: 0 },
  ]);
  // The caller's buffer is untouched (copied, not transferred).
  expect(source.toString()).toBe("xxhelloyyworldzz");
  const leased = await cell.lease({ max: 3 });
  expect(leased.map((m) => [Buffer.from(m.body).toString(), m.contentType, m.attributes])).toEqual([
    ["hello", "text", null],
    ["", "bytes", '{"a":1}'],
    ["world", "json", null],
  ]);
  expect(leased[1]!.sentAt).toBe(1_700_000_000_000);
});

test("a column of strings crosses packed as it can be, and comes back the same", () => {
  const cases: Array<Array<string | null>> = [[], ["bytes", "bytes"], [null, null], ["a", "bc", "", "déf"], ["x", null, "y"]];
  for (const values of cases) {
    const packed = packStrings(values);
    expect(unpackStrings(structuredClone(packed))).toEqual(values);
  }
  expect(packStrings(["j", "j", "j"])).toEqual({ each: "j", count: 3 });
  expect(packStrings(["ab", "c"])).toMatchObject({ text: "abc" });
  expect(packStrings(["a", null])).toEqual({ list: ["a", null] });
});

test("errors keep their class, code, storage facts and cause across the transport", () => {
  const storage = { queue: "q", cause: "disk-full" as const, detail: "SQLITE_FULL", mayHaveTakenEffect: false, writesStopped: false };
  const cell = fromErrorData(toErrorData(new CellError("ERR_STORAGE", "full", { storage, cause: new RangeError("inner") })));
  expect(isCellError(cell, "ERR_STORAGE")).toBe(true);
  expect((cell as CellError).storage).toEqual(storage);
  expect((cell as CellError).retryable).toBe(true);
  expect(cell.cause).toBeInstanceOf(RangeError);
  const background = fromErrorData(toErrorData(new BackgroundWorkError("q", "moving dead letters", "tried again later", new Error("why"))));
  expect(background).toBeInstanceOf(BackgroundWorkError);
  expect(background.message).toBe('queue "q": moving dead letters failed, tried again later: why');
  expect((background as BackgroundWorkError).queue).toBe("q");
  const other = fromErrorData(toErrorData("plain"));
  expect(other).toBeInstanceOf(Error);
  expect(other.message).toBe("plain");
});

test("a waiting lease aborted by its signal answers empty at once", async () => {
  const registry = threaded();
  const cell = await registry.open("q");
  const controller = new AbortController();
  const started = Date.now();
  const waiting = cell.lease({ max: 1, waitSeconds: 20, signal: controller.signal });
  setTimeout(() => controller.abort(), 50);
  expect(await waiting).toEqual([]);
  expect(Date.now() - started).toBeLessThan(2_000);
  // Already aborted: one attempt, no wait.
  expect(await cell.lease({ max: 1, waitSeconds: 20, signal: AbortSignal.abort() })).toEqual([]);
  // A wait that is not aborted is served by a send.
  const served = cell.lease({ max: 1, waitSeconds: 20, signal: new AbortController().signal });
  await cell.send([text("late")]);
  expect(bodies(await served)).toEqual(["late"]);
});

test("configure and pause reach the mirror and the paused listeners", async () => {
  const registry = threaded();
  const cell = await registry.open("q", { visibilityTimeoutSeconds: 45 });
  expect(cell.queueConfig.visibilityTimeoutSeconds).toBe(45);
  const told: boolean[] = [];
  const stop = cell.onDeliveryPausedChange((config) => told.push(config.deliveryPaused));
  const paused = await cell.configure({ deliveryPaused: true });
  expect(paused.deliveryPaused).toBe(true);
  expect(told).toEqual([true]);
  expect(cell.queueConfig.deliveryPaused).toBe(true);
  await cell.configure({ deliveryPaused: false });
  expect(told).toEqual([true, false]);
  stop();
  await cell.configure({ deliveryPaused: true });
  expect(told).toEqual([true, false]);
  const refused = await cell.configure({ visibilityTimeoutSeconds: 0 }).catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(CellError);
  expect(cell.queueConfig.visibilityTimeoutSeconds).toBe(45);
});

test("a dead letter moves from a queue on one thread to its dead-letter queue on another", async () => {
  const registry = threaded();
  const [source] = namesOn(0, 2, 1, "src");
  const [target] = namesOn(1, 2, 1, "dlq");
  const dlq = await registry.open(target!);
  const cell = await registry.open(source!, { maxDeliveries: 1, deadLetter: { kind: "queue", queue: target! } });
  await cell.send([text("doomed")]);
  const [m] = await cell.lease({ max: 1 });
  expect(await cell.nack(refs([m!]))).toMatchObject({ deadLettered: 1 });
  const moved = await dlq.lease({ max: 1, waitSeconds: 10 });
  expect(bodies(moved)).toEqual(["doomed"]);
  await until(() => cell.committedCounts().movingToDeadLetterQueue === 0, "the move to end on the source");
  expect((await cell.counts()).dead).toBe(0);
});

test("two queues on two threads run on two threads", async () => {
  const registry = threaded();
  const a = await registry.open(namesOn(0, 2, 1)[0]!);
  const b = await registry.open(namesOn(1, 2, 1)[0]!);
  const before = await registry.threadCpu();
  expect(before.map((t) => t.thread).sort()).toEqual([0, 1]);
  const work = async (cell: typeof a): Promise<void> => {
    for (let i = 0; i < 30; i++) {
      await cell.send(Array.from({ length: 100 }, (_, j) => text(`m${i}-${j}`.padEnd(200, "x"))));
      await cell.ack(refs(await cell.lease({ max: 100 })));
    }
  };
  await Promise.all([work(a), work(b)]);
  const after = await registry.threadCpu();
  for (const thread of [0, 1]) {
    const was = before.find((t) => t.thread === thread)!;
    const is = after.find((t) => t.thread === thread)!;
    expect(is.userMs + is.systemMs, `thread ${thread} CPU`).toBeGreaterThan(was.userMs + was.systemMs);
  }
});

test("committed tallies and refused sends reach the main thread's observer", async () => {
  const tallies = new Map<string, CellTally>();
  const refused: string[] = [];
  const sends: boolean[] = [];
  const synced: number[] = [];
  const registry = threaded({
    durability: "full",
    onFileSynced: (seconds) => synced.push(seconds),
    observe: (name) => ({
      committed: (tally) => {
        const sum = tallies.get(name) ?? emptyTally();
        for (const key of Object.keys(tally) as Array<keyof CellTally>) sum[key] += tally[key];
        tallies.set(name, sum);
      },
      sendRefused: (code) => refused.push(code),
      sendStarted: () => (committed) => sends.push(committed),
    }),
  });
  const cell = await registry.open("q");
  await cell.send([text("a"), text("b")]);
  expect(tallies.get("q")?.sent).toBe(2);
  const leased = await cell.lease({ max: 2 });
  await cell.ack(refs(leased));
  expect(tallies.get("q")).toMatchObject({ sent: 2, delivered: 2, acked: 2 });
  await cell.send([]).catch(() => undefined);
  expect(refused).toEqual(["ERR_BATCH_COUNT"]);
  expect(sends).toEqual([true, false]);
  await until(() => synced.length > 0, "a flush time");
  expect(synced.every((s) => s >= 0 && s < 60)).toBe(true);
});

test("drop, close and closeAll: cells close, files go, threads exit", async () => {
  const dataDir = tempDir();
  const registry = new ThreadedCellRegistry({ dataDir, threads: 2, durability: "off" });
  const a = await registry.open("a");
  const b = await registry.open("b");
  await a.send([text("x")]);
  await registry.close("a");
  expect(a.isClosed).toBe(true);
  await expect(a.send([text("y")])).rejects.toSatisfy((error) => isCellError(error, "ERR_CELL_CLOSED"));
  const reopened = await registry.open("a");
  expect(reopened).not.toBe(a);
  expect((await reopened.counts()).ready).toBe(1);
  await registry.drop("a");
  expect(reopened.isClosed).toBe(true);
  expect(existsSync(registry.pathOf("a"))).toBe(false);
  expect(registry.storedNames()).toEqual(["b"]);
  await registry.closeAll();
  expect(b.isClosed).toBe(true);
  expect(registry.openCells()).toEqual([]);
  expect((await registry.threadCpu())).toEqual([]);
  await expect(registry.open("b")).rejects.toSatisfy((error) => isCellError(error, "ERR_CELL_CLOSED"));
});

test("a thread killed mid-call fails its calls; the next call works on a new thread and loses nothing", async () => {
  const registry = threaded({ durability: "full", threads: 1 });
  let cell = await registry.open("q");
  const answered: string[] = [];
  const pending: Array<Promise<unknown>> = [];
  for (let i = 0; i < 200; i++) {
    pending.push(cell.send([text(`m${i}`)]).then(() => answered.push(`m${i}`)));
    if (i === 100) pending.push(registry.terminateThread(0));
  }
  const results = await Promise.allSettled(pending);
  const failures = results.flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
  expect(failures.length).toBeGreaterThan(0);
  for (const failure of failures) {
    expect(isCellError(failure, "ERR_STORAGE"), String(failure)).toBe(true);
    expect((failure as CellError).storage).toMatchObject({ mayHaveTakenEffect: true, writesStopped: false });
    expect((failure as CellError).message).toMatch(/cell thread 0 \(queues "q"\) exited/);
  }
  expect(cell.isClosed).toBe(true);
  cell = await registry.open("q");
  const stored = new Set<string>();
  for (;;) {
    const leased = await cell.lease({ max: 100 });
    if (leased.length === 0) break;
    for (const body of bodies(leased)) stored.add(body);
    await cell.ack(refs(leased));
  }
  for (const body of answered) expect(stored.has(body), body).toBe(true);
  expect(stored.size).toBeGreaterThanOrEqual(answered.length);
});

test("storedNames and diskUsage list the queues of every thread", async () => {
  const registry = threaded({ threads: 3 });
  const names = ["a", "b", "c", "d", "e"];
  for (const name of names) await (await registry.open(name)).send([text(name)]);
  expect(new Set(names.map((name) => registry.threadOf(name))).size).toBeGreaterThan(1);
  expect(registry.storedNames()).toEqual(names);
  expect(registry.diskUsage().queues).toBe(5);
  expect(registry.openNames().sort()).toEqual(names);
});

test("a restart on the same directory keeps every queue and message", async () => {
  const dataDir = tempDir();
  const first = new ThreadedCellRegistry({ dataDir, threads: 2 });
  for (const name of ["a", "b", "c"]) await (await first.open(name, { maxDeliveries: 7 })).send([text(`${name}1`), text(`${name}2`)]);
  await first.closeAll();
  const second = threaded({ dataDir, threads: 2, durability: "full" });
  expect(second.storedNames()).toEqual(["a", "b", "c"]);
  for (const name of ["a", "b", "c"]) {
    const cell = await second.open(name);
    expect(cell.queueConfig.maxDeliveries).toBe(7);
    expect(bodies(await cell.lease({ max: 10 }))).toEqual([`${name}1`, `${name}2`]);
  }
  // And a plain registry reads the same files.
  await second.closeAll();
  const plain = new CellRegistry({ dataDir });
  expect((await (await plain.open("a")).counts()).leased).toBe(2);
  await plain.closeAll();
});

test("bad options are refused, naming the field and the bound", async () => {
  const dataDir = tempDir();
  // The bound itself is taken (threads start at their first queue, so none starts here).
  await new ThreadedCellRegistry({ dataDir, threads: limits.cellThreadsMax }).closeAll();
  expect(() => new ThreadedCellRegistry({ dataDir, threads: 0 })).toThrow(new RangeError(`threads must be a whole number from 1 to ${limits.cellThreadsMax}, got 0`));
  expect(() => new ThreadedCellRegistry({ dataDir, threads: limits.cellThreadsMax + 1 })).toThrow(RangeError);
  expect(() => new ThreadedCellRegistry({ dataDir, threads: 1.5 })).toThrow(RangeError);
  expect(() => new ThreadedCellRegistry({ dataDir, threads: 1, clock: new ManualClock() })).toThrow(/system clock/);
  expect(() => new ThreadedCellRegistry({ dataDir, threads: 1, syncFile: () => {} } as unknown as ThreadedCellRegistryOptions)).toThrow(/syncFile/);
});

test("after closeAll nothing is left running: the process exits by itself", async () => {
  const child = join(import.meta.dirname, "threaded-exit-child.ts");
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", child, tempDir()], { timeout: 30_000 });
  expect(stdout).toBe("closed\n");
});
