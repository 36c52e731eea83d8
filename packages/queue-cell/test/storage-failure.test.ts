/**
 * What a cell's caller is told when its call fails on storage: the words, and the same as facts
 * (`CellError.storage`) that the HTTP API and the Worker binding act on. Failures are injected
 * through the store (a full disk) and the log's flush (a SyncFile stand-in).
 */
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, test } from "vitest";
import { CellError, ManualClock, QueueCell, SqliteCellStore, storageCause } from "../src/index.ts";
import { heldSync, ObservedStore, settle, sqliteStore, text } from "./cell-harness.ts";
import { tempDir } from "./temp-dir.ts";

const rejection = (p: Promise<unknown>): Promise<CellError> => p.then(
  () => {
    throw new Error("expected a rejection");
  },
  (error: unknown) => error as CellError,
);

/** A system error as Node's fs raises it. */
function systemError(code: string, message: string): Error {
  return Object.assign(new Error(`${code}: ${message}`), { code });
}

describe("a commit that fails on a full disk", () => {
  test("says nothing of the call was written and that writes resume, names the queue and the cause; they do resume", async () => {
    const observed = new ObservedStore(sqliteStore(tempDir()));
    const cell = new QueueCell({ name: "jobs", store: observed.wrap(), clock: new ManualClock() });
    await cell.send([text("kept")]);
    observed.diskFull = true;
    const error = await rejection(cell.send([text("refused")]));
    expect(error.code).toBe("ERR_STORAGE");
    expect(error.message).toBe(
      "the queue's storage failed: database or disk is full (SQLITE_FULL); nothing of this call was written, " +
        "and writes resume by themselves once the disk has free space",
    );
    expect(error.storage).toEqual({
      queue: "jobs",
      cause: "disk-full",
      detail: "SQLITE_FULL: database or disk is full",
      mayHaveTakenEffect: false,
      writesStopped: false,
    });
    observed.diskFull = false;
    await cell.send([text("after")]);
    expect(await cell.counts()).toMatchObject({ ready: 2 });
    await cell.close();
  });

  test("another failed commit says nothing was written, without promising anything of the disk", async () => {
    const observed = new ObservedStore(sqliteStore(tempDir()));
    const cell = new QueueCell({ name: "jobs", store: observed.wrap(), clock: new ManualClock() });
    observed.failNext = true;
    const error = await rejection(cell.counts());
    expect(error.message).toBe("the queue's storage failed: disk I/O error (injected) (SQLITE_IOERR); nothing of this call was written");
    expect(error.storage).toMatchObject({ cause: "io-error", mayHaveTakenEffect: false, writesStopped: false });
    await cell.close();
  });
});

describe("a failed flush of the log", () => {
  test("tells the calls it held that they may have taken effect; later calls that nothing was written; both that writes stopped", async () => {
    const sync = heldSync();
    const store = new SqliteCellStore(join(tempDir(), "q.sqlite"), { durability: "full", syncFile: sync.syncFile });
    const cell = new QueueCell({ name: "jobs", store, clock: new ManualClock() });
    const sent = rejection(cell.send([text("maybe")]));
    await new Promise((resolve) => setImmediate(resolve));
    sync.finish(systemError("ENOSPC", "no space left on device, fdatasync"));
    const first = await sent;
    expect(first.message).toBe(
      "the queue's storage failed: flushing its log to disk failed (ENOSPC: no space left on device, fdatasync); " +
        "this call may or may not have taken effect, and the queue takes no more writes until celld is restarted",
    );
    expect(first.storage).toEqual({
      queue: "jobs",
      cause: "disk-full",
      detail: "ENOSPC: no space left on device, fdatasync",
      mayHaveTakenEffect: true,
      writesStopped: true,
    });
    const later = await rejection(cell.send([text("refused")]));
    expect(later.message).toBe(
      "the queue's storage failed: flushing its log to disk failed earlier (ENOSPC: no space left on device, fdatasync), " +
        "so it takes no more writes until celld is restarted; what was answered before that failure is on disk; " +
        "nothing of this call was written",
    );
    expect(later.storage).toMatchObject({ cause: "disk-full", mayHaveTakenEffect: false, writesStopped: true });
    await cell.close();
  });
});

describe("a queue whose files are deleted or moved while it is open", () => {
  const opened = (path: string, durability: "full" | "normal"): QueueCell =>
    new QueueCell({ name: "jobs", store: new SqliteCellStore(path, { durability }), clock: new ManualClock() });

  for (const durability of ["full", "normal"] as const) {
    test(`(durability ${durability}) refuses the send that went into them, saying it may not be on disk, and takes no more writes`, async () => {
      const dir = tempDir();
      const path = join(dir, "q.sqlite");
      const cell = opened(path, durability);
      await cell.send([text("before")]);
      for (const suffix of ["", "-wal", "-shm"]) rmSync(path + suffix);
      const first = await rejection(cell.send([text("into the deleted files")]));
      expect(first.message).toBe(
        `the queue's storage failed: its files were deleted or moved while the queue was open (${path} is gone); this call ` +
          `may not be on disk, and the queue takes no more writes until celld is restarted, which opens what is at ${path} ` +
          "then (the queue starts empty if nothing is)",
      );
      expect(first.storage).toMatchObject({ queue: "jobs", mayHaveTakenEffect: true, writesStopped: true });
      const later = await rejection(cell.send([text("refused")]));
      expect(later.message).toMatch(/^the queue's storage failed: its files were deleted or moved while the queue was open \(.* is gone\), so it takes no more writes until celld is restarted, .*; nothing of this call was written$/);
      expect(later.storage).toMatchObject({ mayHaveTakenEffect: false, writesStopped: true });
      await expect(cell.lease({ max: 1 })).rejects.toMatchObject({ code: "ERR_STORAGE" });
      // Never idle, so a registry keeps it refusing rather than closing it and opening an empty queue.
      expect(cell.idleSince()).toBeUndefined();
      await cell.close();
      expect(existsSync(path)).toBe(false);
    });
  }

  test("a log deleted alone, or a database file replaced by another, is found too", async () => {
    const dir = tempDir();
    const logGone = join(dir, "a.sqlite");
    const a = opened(logGone, "full");
    await a.send([text("a")]);
    rmSync(`${logGone}-wal`);
    expect((await rejection(a.send([text("a")]))).message).toContain(`(${logGone}-wal is gone)`);
    await a.close();

    const replaced = join(dir, "b.sqlite");
    const b = opened(replaced, "normal");
    await b.send([text("b")]);
    copyFileSync(replaced, join(dir, "copy"));
    renameSync(join(dir, "copy"), replaced);
    expect((await rejection(b.send([text("b")]))).message).toContain(`(${replaced} is another file now)`);
    await b.close();
  });

  test("a cell whose files stay where they are takes writes, and its reopening finds them", async () => {
    const path = join(tempDir(), "q.sqlite");
    const cell = opened(path, "full");
    await cell.send([text("kept")]);
    expect((await cell.lease({ max: 1 })).length).toBe(1);
    await cell.close();
    const again = opened(path, "full");
    expect((await again.counts()).leased).toBe(1);
    await again.close();
  });
});

test("a cell whose file cannot be opened is a storage failure of the call that opens it, not a bug", () => {
  const dir = tempDir();
  // A directory where the file belongs: SQLite cannot open it, whoever runs the test.
  mkdirSync(join(dir, "jobs.sqlite"));
  let error: unknown;
  try {
    new QueueCell({ name: "jobs", path: join(dir, "jobs.sqlite"), clock: new ManualClock() });
  } catch (thrown) {
    error = thrown;
  }
  expect(error).toBeInstanceOf(CellError);
  expect((error as CellError).message).toBe(
    `the queue's storage failed: opening ${join(dir, "jobs.sqlite")}: unable to open database file (SQLITE_CANTOPEN); nothing of this call was written`,
  );
  expect((error as CellError).storage).toMatchObject({ queue: "jobs", cause: "other", mayHaveTakenEffect: false, writesStopped: false });
});

test("storageCause reads SQLite's and the file system's codes, extended codes as their primary one", () => {
  const cases: Array<[Error, string, string]> = [
    [new Database.SqliteError("database or disk is full", "SQLITE_FULL"), "disk-full", "SQLITE_FULL: database or disk is full"],
    [systemError("ENOSPC", "no space left on device, write"), "disk-full", "ENOSPC: no space left on device, write"],
    [systemError("EDQUOT", "disk quota exceeded, write"), "disk-full", "EDQUOT: disk quota exceeded, write"],
    [new Database.SqliteError("attempt to write a readonly database", "SQLITE_READONLY"), "read-only", "SQLITE_READONLY: attempt to write a readonly database"],
    [new Database.SqliteError("attempt to write a readonly database", "SQLITE_READONLY_DBMOVED"), "read-only", "SQLITE_READONLY_DBMOVED: attempt to write a readonly database"],
    [systemError("EROFS", "read-only file system, open"), "read-only", "EROFS: read-only file system, open"],
    [systemError("EACCES", "permission denied, open"), "permission", "EACCES: permission denied, open"],
    [new Database.SqliteError("disk I/O error", "SQLITE_IOERR_WRITE"), "io-error", "SQLITE_IOERR_WRITE: disk I/O error"],
    [systemError("EIO", "i/o error, fdatasync"), "io-error", "EIO: i/o error, fdatasync"],
    [new Database.SqliteError("unable to open database file", "SQLITE_CANTOPEN"), "other", "SQLITE_CANTOPEN: unable to open database file"],
    [new Error("no code at all"), "other", "no code at all"],
  ];
  for (const [error, cause, detail] of cases) {
    // Found through the CellError that wraps it, as a store reports it.
    expect(storageCause(new CellError("ERR_STORAGE", "the queue's storage failed", { cause: error }))).toEqual({ cause, detail });
  }
});

/**
 * Writes garbage over the first overflow page of the messages table, which holds the body of one
 * of the oldest messages: a lease reads it; opening the cell reads only the columns before the
 * body, and a send writes new pages.
 */
function damageOldestBody(path: string): void {
  const db = new Database(path);
  const { pageno, size } = db
    .prepare("SELECT pageno, pgsize AS size FROM dbstat WHERE name = 'messages' AND pagetype = 'overflow' ORDER BY path LIMIT 1")
    .get() as { pageno: number; size: number };
  db.close();
  const fd = openSync(path, "r+");
  writeSync(fd, Buffer.alloc(size, 0x5a), 0, size, (pageno - 1) * size);
  closeSync(fd);
}

describe("a damaged file", () => {
  test("a call that finds it names the file and what to do, and the queue takes no more writes: more could overwrite what a recovery can read", async () => {
    const dir = tempDir();
    const path = join(dir, "jobs.sqlite");
    const clock = new ManualClock();
    const first = new QueueCell({ name: "jobs", path, clock, durability: "off" });
    // Bodies larger than a page, kept on overflow pages.
    for (let i = 0; i < 10; i++) await first.send([text(`m${i} ${"x".repeat(10_000)}`)]);
    await first.close();
    damageOldestBody(path);

    const cell = new QueueCell({ name: "jobs", path, clock, durability: "off" });
    const leased = await rejection(cell.lease({ max: 100 }));
    expect(leased.code).toBe("ERR_STORAGE");
    expect(leased.message).toMatch(/^the queue's storage failed: database disk image is malformed \(SQLITE_CORRUPT\w*\); nothing of this call was written; /);
    expect(leased.message).toContain(
      `; the queue's file ${path} is damaged: stop celld, keep a copy of it and its -wal, and recover it as "A damaged queue file" in docs/message-life.md says`,
    );
    expect(leased.storage).toMatchObject({ queue: "jobs", file: path, cause: "corrupt", mayHaveTakenEffect: false, writesStopped: true });
    const sent = await rejection(cell.send([text("after")]));
    expect(sent.storage).toMatchObject({ cause: "corrupt", writesStopped: true });
    await cell.close();
  });

  test("a file that is not a database at all fails the open, naming the file and what to do, and is left as it was", () => {
    const path = join(tempDir(), "jobs.sqlite");
    writeFileSync(path, "my notes, not a queue\n".repeat(20));
    let error: unknown;
    try {
      new QueueCell({ name: "jobs", path, clock: new ManualClock() });
    } catch (thrown) {
      error = thrown;
    }
    expect((error as CellError).storage).toMatchObject({ queue: "jobs", file: path, cause: "corrupt" });
    expect((error as CellError).message).toContain(`the queue's file ${path} is damaged: stop celld`);
    expect(readFileSync(path, "utf8")).toBe("my notes, not a queue\n".repeat(20));
  });
});

test("a file that holds another queue (copied under this queue's name) is refused, naming both, and left as it was", async () => {
  const dir = tempDir();
  const billing = join(dir, "billing.sqlite");
  const orders = join(dir, "orders.sqlite");
  const clock = new ManualClock();
  const first = new QueueCell({ name: "billing", path: billing, clock, durability: "off" });
  await first.send([text("an invoice")]);
  await first.close();
  copyFileSync(billing, orders);
  const before = readFileSync(orders);

  let error: unknown;
  try {
    new QueueCell({ name: "orders", path: orders, clock, durability: "off" });
  } catch (thrown) {
    error = thrown;
  }
  expect((error as CellError).message).toBe(
    `the queue's storage failed: opening ${orders}: the file holds queue "billing", not "orders": it was copied or renamed here; ` +
      `nothing in it was changed: move it away (queue "orders" then starts empty), or back to where queue "billing" keeps its file; ` +
      "nothing of this call was written",
  );
  expect((error as CellError).storage).toMatchObject({ queue: "orders", file: orders, cause: "misplaced" });
  expect(readFileSync(orders).equals(before)).toBe(true);
});

describe("a purge or a replay that fails after its first group", () => {
  /** One row a message: more rows than one group of a purge or replay takes (5,000). */
  async function cellOfRows(rows: number) {
    const clock = new ManualClock();
    const observed = new ObservedStore(sqliteStore(tempDir()));
    const cell = new QueueCell({ name: "jobs", store: observed.wrap(), clock, config: { maxDeliveries: 1 } });
    for (let sent = 0; sent < rows; sent += 250) {
      await Promise.all(Array.from({ length: Math.min(250, rows - sent) }, (_, i) => cell.send([text(`m${sent + i}`)])));
    }
    return { clock, observed, cell };
  }

  test("says how many messages its earlier groups did, that they stay done, and that repeating it is safe", async () => {
    const { observed, cell } = await cellOfRows(5_001);
    observed.failAt = observed.transactions + 2;
    const error = await rejection(cell.purge("all"));
    expect(error.message).toBe(
      "the queue's storage failed: disk I/O error (injected) (SQLITE_IOERR); 5000 messages were deleted before it failed " +
        "(in groups of at most 5000 rows, each committed on its own), and stay deleted; repeating the call is safe: it deletes what is left",
    );
    expect(error.storage).toMatchObject({ cause: "io-error", mayHaveTakenEffect: true, writesStopped: false });
    expect(await cell.counts()).toMatchObject({ ready: 1 });
    expect(await cell.purge("all")).toEqual({ purged: 1 });
    await cell.close();
  });

  test("a replay alike; one that fails in its first group wrote nothing and says so", async () => {
    const { clock, observed, cell } = await cellOfRows(5_001);
    for (let leased = 0; leased < 5_001; leased += 100) await cell.lease({ max: 100, visibilityTimeoutSeconds: 10 });
    clock.advance(10_000);
    await settle();
    expect(await cell.counts()).toMatchObject({ dead: 5_001 });
    observed.failNext = true;
    expect((await rejection(cell.replay())).message).toMatch(/; nothing of this call was written$/);
    observed.failAt = observed.transactions + 2;
    const error = await rejection(cell.replay());
    expect(error.message).toMatch(/; 5000 messages were replayed before it failed .*, and stay replayed; repeating the call is safe: only what is still dead is replayed again$/);
    expect(error.storage).toMatchObject({ mayHaveTakenEffect: true });
    expect(await cell.counts()).toMatchObject({ ready: 5_000, dead: 1 });
    expect(await cell.replay()).toEqual({ replayed: 1 });
    await cell.close();
  });
});
