import { chmodSync, existsSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { dirname, join } from "node:path";
import { expect, test } from "vitest";
import { CellRegistry, ManualClock } from "../src/index.ts";
import { settle, text } from "./cell-harness.ts";
import { tempDir } from "./temp-dir.ts";

test("cells open lazily, once per name, each in its own file", async () => {
  const registry = new CellRegistry({ dataDir: tempDir(), durability: "off" });
  expect(registry.openNames()).toEqual([]);
  const [a, again] = await Promise.all([registry.open("orders"), registry.open("orders")]);
  expect(a).toBe(again);
  const b = await registry.open("orgs/o/projects/p/envs/e/queues/orders");
  expect(registry.pathOf("orders")).not.toBe(registry.pathOf("orgs/o/projects/p/envs/e/queues/orders"));
  expect(existsSync(registry.pathOf("orders"))).toBe(true);
  await a.send([text("x")]);
  await b.send([text("y")]);
  expect(registry.storedNames()).toEqual(["orders", "orgs/o/projects/p/envs/e/queues/orders"]);
  await registry.closeAll();
});

test("an idle cell closes and reopens on next use with its messages", async () => {
  const clock = new ManualClock();
  const registry = new CellRegistry({ dataDir: tempDir(), clock, durability: "off" });
  const cell = await registry.open("q");
  await cell.send([text("kept")]);
  clock.advance(59_000);
  expect(await registry.closeIdle(60_000)).toEqual([]);
  clock.advance(1_000);
  expect(await registry.closeIdle(60_000)).toEqual(["q"]);
  expect(cell.isClosed).toBe(true);
  const reopened = await registry.open("q");
  expect(reopened).not.toBe(cell);
  expect((await reopened.counts()).ready).toBe(1);
  await registry.closeAll();
});

test("a cell with a waiting lease or a leased message is not idle", async () => {
  const clock = new ManualClock();
  const registry = new CellRegistry({ dataDir: tempDir(), clock, durability: "off" });
  const cell = await registry.open("q");
  const waiting = cell.lease({ max: 1, waitSeconds: 20 });
  await settle();
  clock.advance(10_000);
  expect(await registry.closeIdle(1_000)).toEqual([]);
  await cell.send([text("m")]);
  const [m] = await waiting;
  clock.advance(10_000);
  expect(await registry.closeIdle(1_000)).toEqual([]);
  await cell.ack([{ id: m!.id, leaseGeneration: m!.leaseGeneration }]);
  clock.advance(10_000);
  expect(await registry.closeIdle(1_000)).toEqual(["q"]);
  await registry.closeAll();
});

test("with idleCloseMs set, a timer closes idle cells", async () => {
  const clock = new ManualClock();
  const registry = new CellRegistry({ dataDir: tempDir(), clock, durability: "off", idleCloseMs: 60_000 });
  const cell = await registry.open("q");
  await cell.send([text("m")]);
  clock.advance(90_000);
  await settle();
  expect(cell.isClosed).toBe(true);
  await registry.closeAll();
  expect(clock.pendingTimers()).toBe(0);
});

test("storedNames passes over what is not a regular file, and tells of a file it cannot read rather than failing", async () => {
  const warnings: string[] = [];
  const dataDir = tempDir();
  const registry = new CellRegistry({ dataDir, durability: "off", onWarning: (message) => warnings.push(message) });
  await (await registry.open("kept")).send([text("m")]);
  const cells = join(dataDir, "cells");
  mkdirSync(join(cells, "a-directory.sqlite"));
  writeFileSync(join(cells, "notes.sqlite"), "not a database, but perhaps a damaged cell");
  symlinkSync(join(cells, "loop.sqlite"), join(cells, "loop.sqlite"));
  const foreign = new Database(join(cells, "foreign.sqlite"));
  foreign.exec("CREATE TABLE t (x)");
  foreign.close();
  expect(registry.storedNames()).toEqual(["kept"]);
  expect(warnings.sort()).toEqual([
    `${join(cells, "loop.sqlite")} is left out of the stored queues: it could not be read: ELOOP: too many symbolic links encountered, stat '${join(cells, "loop.sqlite")}'`,
    `${join(cells, "notes.sqlite")} is left out of the stored queues: it could not be read: file is not a database`,
  ]);
  await registry.closeAll();
});

test("drop removes a queue's file", async () => {
  const registry = new CellRegistry({ dataDir: tempDir(), durability: "off" });
  await (await registry.open("gone")).send([text("m")]);
  await registry.drop("gone");
  expect(existsSync(registry.pathOf("gone"))).toBe(false);
  expect(registry.storedNames()).toEqual([]);
});

test("while closeAll runs no cell opens (a dead-letter move finishing then cannot reopen its target); after it, cells open again", async () => {
  const registry = new CellRegistry({ dataDir: tempDir(), durability: "off" });
  await (await registry.open("q")).send([text("kept")]);
  const closing = registry.closeAll();
  await expect(registry.open("dlq")).rejects.toMatchObject({ code: "ERR_CELL_CLOSED" });
  await closing;
  expect(registry.openNames()).toEqual([]);
  // A server restarted on the same registry finds its queues.
  expect((await (await registry.open("q")).counts()).ready).toBe(1);
  await registry.closeAll();
});

test("a dead-letter move never creates its target: a deleted one leaves the messages in the source's own set, with a warning", async () => {
  const warnings: string[] = [];
  const registry = new CellRegistry({ dataDir: tempDir(), durability: "off", onWarning: (m) => warnings.push(m) });
  const config = { maxDeliveries: 1, deadLetter: { kind: "queue", queue: "dlq" } } as const;
  // An existing target that is not open is opened and takes the message.
  await (await registry.open("dlq")).close();
  await registry.close("dlq");
  const q = await registry.open("q", config);
  await q.send([text("first")]);
  await q.nack(await q.lease({ max: 1 }));
  await settle();
  const dlq = await registry.open("dlq");
  expect((await dlq.counts()).ready).toBe(1);
  // Deleted: the next message stays in q's dead-letter set, and nothing brings the file back.
  await registry.drop("dlq");
  await q.send([text("second")]);
  await q.nack(await q.lease({ max: 1 }));
  await settle();
  expect(existsSync(registry.pathOf("dlq"))).toBe(false);
  expect(registry.openNames()).toEqual(["q"]);
  expect(await q.counts()).toMatchObject({ dead: 1, movingToDeadLetterQueue: 0 });
  expect(warnings).toEqual([
    'queue "q": its dead-letter queue "dlq" does not exist; 1 dead-lettered message(s) kept in this queue\'s own dead-letter set instead',
  ]);
  await registry.closeAll();
});

test("while drop removes a queue's files, a dead-letter move cannot open it", async () => {
  const registry = new CellRegistry({ dataDir: tempDir(), durability: "off" });
  await (await registry.open("dlq")).send([text("m")]);
  const dropping = registry.drop("dlq");
  // The cell is closed and out of the registry, its file not yet removed.
  expect(existsSync(registry.pathOf("dlq"))).toBe(true);
  expect(await registry.openExisting("dlq")).toBeUndefined();
  await dropping;
  expect(await registry.openExisting("dlq")).toBeUndefined();
  expect(existsSync(registry.pathOf("dlq"))).toBe(false);
  expect(registry.openNames()).toEqual([]);
});

test("the cells directory is made for this user alone: a queue's messages are no other local user's to read", async () => {
  const registry = new CellRegistry({ dataDir: join(tempDir(), "data"), durability: "off" });
  const cell = await registry.open("q");
  expect(statSync(dirname(registry.pathOf("q"))).mode & 0o777).toBe(0o700);
  await cell.send([text("private")]);
  await registry.closeAll();
  // One an older celld made open to all is closed to others too: celld alone keeps files there.
  const older = tempDir();
  mkdirSync(join(older, "cells"), { mode: 0o755 });
  chmodSync(join(older, "cells"), 0o755);
  new CellRegistry({ dataDir: older, durability: "off" });
  expect(statSync(join(older, "cells")).mode & 0o777).toBe(0o700);
});

/**
 * A registry on a clock three hours slow for its queue "q", whose one message was leased an hour
 * after the start and nacked for an hour. A cell reopened from its newest message's entry time
 * would go back more than an hour, and the nack's hour would last two.
 */
async function slowClockNackedQueue(options: { openCellsMax?: number } = {}) {
  const dataDir = tempDir();
  const first = new CellRegistry({ dataDir, clock: new ManualClock(), durability: "off" });
  const sentAt = (await (await first.open("q")).send([text("m")])).metrics.oldestMessageTimestamp;
  await first.closeAll();
  const clock = new ManualClock(sentAt - 3 * 3_600_000);
  const registry = new CellRegistry({ dataDir, clock, durability: "off", ...options });
  const cell = await registry.open("q");
  clock.advance(3_600_000);
  const [m] = await cell.lease({ max: 1 });
  await cell.nack([{ id: m!.id, leaseGeneration: m!.leaseGeneration, delaySeconds: 3_600 }]);
  /** Reopens "q" a minute after the nack and checks the nack's hour ends on time. */
  const nackEndsOnTimeAfterReopen = async (): Promise<void> => {
    const reopened = await registry.open("q");
    clock.advance(3_540_000 - 1);
    expect(await reopened.lease({ max: 1 })).toEqual([]);
    clock.advance(1);
    expect(await reopened.lease({ max: 1 })).toHaveLength(1);
    await registry.closeAll();
  };
  return { clock, registry, nackEndsOnTimeAfterReopen };
}

test("a cell closed idle and reopened goes on from the time it had reached, not from its newest message", async () => {
  const { clock, registry, nackEndsOnTimeAfterReopen } = await slowClockNackedQueue();
  // The lease's end, still the cell's next due time, wakes it once; then it is idle.
  clock.advance(30_000);
  await settle();
  clock.advance(30_000);
  expect(await registry.closeIdle(1_000)).toEqual(["q"]);
  await nackEndsOnTimeAfterReopen();
});

test("a cell closed to make room under openCellsMax also goes on from the time it had reached", async () => {
  const { clock, registry, nackEndsOnTimeAfterReopen } = await slowClockNackedQueue({ openCellsMax: 1 });
  clock.advance(60_000);
  await settle();
  await registry.open("other");
  expect(registry.openNames()).toEqual(["other"]);
  await nackEndsOnTimeAfterReopen();
});

test("past openCellsMax, opening a cell first closes the least recently used idle ones; busy and held cells stay open", async () => {
  const clock = new ManualClock();
  const registry = new CellRegistry({ dataDir: tempDir(), clock, durability: "off", openCellsMax: 3 });
  const a = await registry.open("a");
  await a.send([text("kept")]);
  const held = await registry.open("held");
  const release = registry.hold("held");
  const busy = await registry.open("busy");
  const waiting = busy.lease({ max: 1, waitSeconds: 20 });
  await settle();
  await registry.open("a"); // a is now the most recently used: still it is the only idle one
  const d = await registry.open("d");
  expect(a.isClosed).toBe(true);
  expect(held.isClosed).toBe(false);
  expect(busy.isClosed).toBe(false);
  expect(registry.openNames().sort()).toEqual(["busy", "d", "held"]);
  // Nothing idle but d, once its opening group has run: it is closed for e, the rest stay open.
  await settle();
  await registry.open("e");
  expect(d.isClosed).toBe(true);
  expect(registry.openNames().sort()).toEqual(["busy", "e", "held"]);
  // A closed cell reopens with its messages.
  const reopened = await registry.open("a");
  expect(reopened).not.toBe(a);
  expect((await reopened.counts()).ready).toBe(1);
  expect(held.isClosed).toBe(false);
  // Once released, a held cell is closed like any idle one.
  release();
  await registry.open("f");
  expect(held.isClosed).toBe(true);
  await busy.send([text("m")]);
  expect(await waiting).toHaveLength(1);
  await registry.closeAll();
});

test("past openCellsMax, the cell closed is the one used least recently, not the one opened first", async () => {
  const registry = new CellRegistry({ dataDir: tempDir(), durability: "off", openCellsMax: 3 });
  const a = await registry.open("a");
  const b = await registry.open("b");
  await registry.open("c");
  await settle();
  await (await registry.open("a")).send([text("used")]);
  await registry.open("d");
  expect(b.isClosed).toBe(true);
  expect(a.isClosed).toBe(false);
  expect(registry.openNames()).toEqual(["c", "a", "d"]);
  await registry.closeAll();
});

test("openCellsMax bounds the open cells however many queues are used in turn, and their file descriptors with them", async () => {
  const registry = new CellRegistry({ dataDir: tempDir(), durability: "full", openCellsMax: 10 });
  const fds = (): number => readdirSync("/proc/self/fd").length;
  const before = fds();
  for (let i = 0; i < 60; i++) await (await registry.open(`q${i}`)).send([text(`m${i}`)]);
  await settle();
  expect(registry.openNames().length).toBeLessThanOrEqual(10);
  // About five descriptors per open cell (file, log and index, twice), not per queue ever used.
  expect(fds() - before).toBeLessThanOrEqual(10 * 9 + 5);
  for (let i = 0; i < 60; i += 7) expect((await (await registry.open(`q${i}`)).counts()).ready).toBe(1);
  await registry.closeAll();
  expect(fds()).toBeLessThanOrEqual(before + 2);
});

test("diskUsage counts the queue files on disk, open or closed, and their bytes with log and index, opening none", async () => {
  const dataDir = tempDir();
  const registry = new CellRegistry({ dataDir, durability: "off" });
  expect(registry.diskUsage()).toEqual({ queues: 0, bytes: 0 });
  await (await registry.open("a")).send([text("x".repeat(10_000))]);
  await registry.open("b");
  await registry.close("b");
  const cells = join(dataDir, "cells");
  const files = readdirSync(cells);
  const bytes = files.reduce((sum, file) => sum + statSync(join(cells, file)).size, 0);
  expect(files.filter((file) => file.endsWith("-wal")).length).toBeGreaterThan(0);
  expect(registry.diskUsage()).toEqual({ queues: 2, bytes });
  // Nothing else in the directory counts.
  writeFileSync(join(cells, "notes.txt"), "not a queue");
  expect(registry.diskUsage()).toEqual({ queues: 2, bytes });
  await registry.closeAll();
});
