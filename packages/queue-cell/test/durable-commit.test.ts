import { copyFileSync, existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { ManualClock, QueueCell, SqliteCellStore, isCellError, type SyncFile } from "../src/index.ts";
import type { Worker } from "node:worker_threads";
import { CheckpointFlushError, WalCheckpointer } from "../src/wal-checkpointer.ts";
import { WalIndex } from "../src/wal-index.ts";
import { heldSync, text, until } from "./cell-harness.ts";
import { tempDir } from "./temp-dir.ts";


const settled = async (p: Promise<unknown>): Promise<boolean> => {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return done;
};


function cellWith(syncFile: SyncFile, extra: { checkpointWalBytes?: number } = {}) {
  const dir = tempDir();
  const path = join(dir, "q.sqlite");
  const store = new SqliteCellStore(path, { durability: "full", syncFile, ...extra });
  return { path, cell: new QueueCell({ name: "q", store, clock: new ManualClock() }) };
}

describe("durable commits (durability full)", () => {
  it("answers a send only after the log has been flushed", async () => {
    const sync = heldSync();
    const { cell } = cellWith(sync.syncFile);
    const send = cell.send([text("a")]);
    expect(await settled(send)).toBe(false);
    expect(sync.calls).toBe(1);
    sync.finish();
    await expect(send).resolves.toMatchObject({ ids: [expect.any(String)] });
  });

  it("does not hold the next group back, and one flush serves every group committed during the last", async () => {
    const sync = heldSync();
    const { cell, path } = cellWith(sync.syncFile);
    const sent = Promise.all(["a", "b", "c"].map((body) => cell.send([text(body)])));
    await settled(sent);
    sync.finish();
    await sent;
    // A consumer's calls (not a producer's: see the next test): two more groups commit while the
    // first flush runs, and wait for the next flush together.
    const lease = () => cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    const first = lease();
    await settled(first);
    const second = lease();
    await settled(second);
    const third = lease();
    await settled(third);
    // All three groups have committed (another connection sees them), none is answered yet.
    const reader = new Database(path, { readonly: true });
    expect(reader.prepare("SELECT count(*) AS n FROM messages WHERE deliveries > 0").get()).toEqual({ n: 3 });
    reader.close();
    expect(sync.calls).toBe(1);
    sync.finish();
    await first;
    expect(await settled(second)).toBe(false);
    expect(sync.calls).toBe(1);
    sync.finish();
    await Promise.all([second, third]);
  });

  it("a send committed while a flush runs starts its own beside it; both are answered when the later ends", async () => {
    const sync = heldSync();
    const { cell } = cellWith(sync.syncFile);
    const ready = cell.send([text("a")]);
    await settled(ready);
    sync.finish();
    await ready;
    const lease = cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    await settled(lease);
    expect(sync.calls).toBe(1);
    // A producer waits on this one: its flush starts now, not after the lease's.
    const send = cell.send([text("b")]);
    await settled(send);
    expect(sync.calls).toBe(2);
    // No third flush joins them: this send waits for the two to end, then has its own.
    const third = cell.send([text("c")]);
    await settled(third);
    expect(sync.calls).toBe(2);
    sync.finish();
    // The first flush is done, but a failed writeback may be reported to either of two that
    // overlap: nobody is answered before both have ended.
    expect(await settled(lease)).toBe(false);
    expect(await settled(send)).toBe(false);
    expect(sync.calls).toBe(1);
    sync.finish();
    await expect(lease).resolves.toHaveLength(1);
    await expect(send).resolves.toMatchObject({ ids: [expect.any(String)] });
    expect(await settled(third)).toBe(false);
    expect(sync.calls).toBe(1);
    sync.finish();
    await expect(third).resolves.toMatchObject({ ids: [expect.any(String)] });
  });

  for (const failing of ["earlier", "later"] as const) {
    it(`of two overlapping flushes, the ${failing} failing fails the callers of both`, async () => {
      const sync = heldSync();
      const { cell } = cellWith(sync.syncFile);
      const ready = cell.send([text("a")]);
      await settled(ready);
      sync.finish();
      await ready;
      const lease = cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
      await settled(lease);
      const send = cell.send([text("b")]);
      await settled(send);
      expect(sync.calls).toBe(2);
      const eio = new Error("EIO: i/o error, fdatasync");
      sync.finish(failing === "earlier" ? eio : null);
      sync.finish(failing === "later" ? eio : null);
      for (const p of [lease, send]) {
        const error = await p.catch((e: unknown) => e);
        expect(isCellError(error, "ERR_STORAGE")).toBe(true);
        expect((error as Error).message).toMatch(/flushing its log to disk failed \(EIO.*\); this call may or may not have taken effect/);
      }
      await expect(cell.send([text("c")])).rejects.toThrow(/failed earlier \(EIO.*\), so it takes no more writes/);
      expect(sync.calls).toBe(0);
    });
  }

  it("holds back a lease of a message until the lease itself is durable", async () => {
    const sync = heldSync();
    const { cell } = cellWith(sync.syncFile);
    const send = cell.send([text("a")]);
    await settled(send);
    sync.finish();
    await send;
    const lease = cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    expect(await settled(lease)).toBe(false);
    sync.finish();
    expect(await lease).toHaveLength(1);
  });

  it("starts no flush for a group that wrote nothing, but answers it after the flush already running", async () => {
    const sync = heldSync();
    const { cell } = cellWith(sync.syncFile);
    const first = cell.send([text("a")]);
    await settled(first);
    sync.finish();
    await first;
    const taken = cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    await settled(taken);
    sync.finish();
    await expect(taken).resolves.toHaveLength(1);
    // Everything is on disk: an empty lease is answered at once, with no flush.
    const empty = cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    expect(await settled(empty)).toBe(true);
    expect(sync.calls).toBe(0);
    await expect(empty).resolves.toEqual([]);
    // A delayed message commits, and its flush runs: a lease that finds nothing ready writes
    // nothing, so it asks for no flush of its own, yet waits for the running one.
    const send = cell.send([text("later", { delaySeconds: 60 })]);
    await settled(send);
    expect(sync.calls).toBe(1);
    const lease = cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    expect(await settled(lease)).toBe(false);
    expect(sync.calls).toBe(1);
    sync.finish();
    await send;
    await expect(lease).resolves.toEqual([]);
    expect(sync.calls).toBe(0);
  });

  it("after a failed flush, tells every caller of the group it may have taken effect, and takes no more writes", async () => {
    const sync = heldSync();
    const { cell } = cellWith(sync.syncFile);
    const a = cell.send([text("a")]);
    const b = cell.send([text("b")]);
    await settled(a);
    // Committed while the first flush runs, a producer's group has a flush of its own beside it,
    // which works; what it proves is lost with the first (see the overlapping flushes above).
    const c = cell.send([text("c")]);
    await settled(c);
    expect(sync.calls).toBe(2);
    sync.finish(new Error("EIO: i/o error, fdatasync"));
    sync.finish();
    for (const p of [a, b, c]) {
      const error = await p.catch((e: unknown) => e);
      expect(isCellError(error, "ERR_STORAGE")).toBe(true);
      expect((error as Error).message).toMatch(/flushing its log to disk failed \(EIO.*\); this call may or may not have taken effect/);
    }
    // A later flush could succeed without the pages the failed one lost (Linux reports a failed
    // writeback once), and a commit on top of that hole would be lost with it: no group runs any
    // more (a count is a group too: it applies what fell due), and nothing is flushed.
    await expect(cell.send([text("d")])).rejects.toThrow(/failed earlier \(EIO.*\), so it takes no more writes until celld is restarted/);
    await expect(cell.lease({ max: 1 })).rejects.toMatchObject({ code: "ERR_STORAGE" });
    await expect(cell.counts()).rejects.toMatchObject({ code: "ERR_STORAGE" });
    expect(sync.calls).toBe(0);
  });

  it("a restart after a failed flush finds what the log holds, and takes writes again", async () => {
    const sync = heldSync();
    const { cell, path } = cellWith(sync.syncFile);
    const sent = cell.send([text("maybe")]);
    await settled(sent);
    sync.finish(new Error("EIO: i/o error, fdatasync"));
    await expect(sent).rejects.toMatchObject({ code: "ERR_STORAGE" });
    await cell.close();
    // Here the disk kept the write: the caller was told it may have taken effect, and it did.
    const again = new QueueCell({ name: "q", store: new SqliteCellStore(path, { durability: "full" }), clock: new ManualClock() });
    expect(await again.counts()).toMatchObject({ ready: 1 });
    await again.send([text("after")]);
    expect(await again.counts()).toMatchObject({ ready: 2 });
    await again.close();
  });

  it("reopening an unchanged queue writes nothing: no flush, no commit in its log to copy at close", async () => {
    const path = join(tempDir(), "q.sqlite");
    const first = new QueueCell({ name: "q", path, clock: new ManualClock(), config: { maxDeliveries: 3 } });
    await first.send([text("kept")]);
    await first.close();
    const sync = heldSync();
    const store = new SqliteCellStore(path, { durability: "full", syncFile: sync.syncFile });
    const again = new QueueCell({ name: "q", store, clock: new ManualClock() });
    const counts = again.counts();
    expect(await settled(counts)).toBe(true);
    expect(sync.calls).toBe(0);
    expect(await counts).toMatchObject({ ready: 1 });
    expect(again.queueConfig.maxDeliveries).toBe(3);
    const shm = WalIndex.open(`${path}-shm`);
    expect(shm.uncheckpointedBytes()).toBe(0);
    shm.close();
    await again.close();
    expect(sync.calls).toBe(0);
    // A changed setting is written, and flushed like any commit.
    const changed = new QueueCell({ name: "q", store: new SqliteCellStore(path, { durability: "full", syncFile: sync.syncFile }), clock: new ManualClock(), config: { maxDeliveries: 4 } });
    await settled(changed.counts());
    expect(sync.calls).toBe(1);
    sync.finish();
    await changed.close();
    const reread = new QueueCell({ name: "q", path, clock: new ManualClock() });
    expect(reread.queueConfig.maxDeliveries).toBe(4);
    await reread.close();
  });

  it("a log left with commits in it (a crash) is still copied into the database file at open", async () => {
    const dir = tempDir();
    const path = join(dir, "q.sqlite");
    const cell = new QueueCell({ name: "q", path, clock: new ManualClock() });
    await cell.send([text("in the log")]);
    // The files as a crash leaves them: the log holds the commit, not yet copied.
    for (const suffix of ["", "-wal"]) copyFileSync(path + suffix, join(dir, `crashed.sqlite${suffix}`));
    await cell.close();
    const crashed = join(dir, "crashed.sqlite");
    const reopened = new SqliteCellStore(crashed, { durability: "full" });
    const shm = WalIndex.open(`${crashed}-shm`);
    expect(shm.uncheckpointedBytes()).toBe(0);
    shm.close();
    reopened.close();
    const reader = new Database(crashed, { readonly: true });
    expect(reader.prepare("SELECT count(*) AS n FROM messages").get()).toEqual({ n: 1 });
    reader.close();
  });

  it("a cell whose flush failed keeps refusing: it is never idle, so it is not closed and opened again", async () => {
    const sync = heldSync();
    const clock = new ManualClock();
    const path = join(tempDir(), "q.sqlite");
    const cell = new QueueCell({ name: "q", store: new SqliteCellStore(path, { durability: "full", syncFile: sync.syncFile }), clock });
    const sent = cell.send([text("a")]);
    await settled(sent);
    sync.finish(new Error("EIO: i/o error, fdatasync"));
    await expect(sent).rejects.toMatchObject({ code: "ERR_STORAGE" });
    clock.advance(3_600_000);
    expect(cell.idleSince()).toBeUndefined();
    await cell.close();
  });

  it("a failed close-time flush is no reason to copy the log: after a failed flush, close leaves it for the next open", async () => {
    const sync = heldSync();
    const { cell, path } = cellWith(sync.syncFile);
    const answered = cell.send([text("answered")]);
    await settled(answered);
    sync.finish();
    await answered;
    const maybe = cell.send([text("maybe")]);
    await settled(maybe);
    sync.finish(new Error("EIO: i/o error, fdatasync"));
    await expect(maybe).rejects.toMatchObject({ code: "ERR_STORAGE" });
    const fileBytes = statSync(path).size;
    await cell.close();
    // Not copied into the database file and deleted, as a clean close does.
    expect(statSync(`${path}-wal`).size).toBeGreaterThan(0);
    expect(statSync(path).size).toBe(fileBytes);
    const again = new QueueCell({ name: "q", path, clock: new ManualClock() });
    expect(await again.counts()).toMatchObject({ ready: 2 });
    await again.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
  });

  it("a failed flush of the database file in a checkpoint stops writes and keeps the log, which the next open recovers", async () => {
    const errors: unknown[] = [];
    const path = join(tempDir(), "q.sqlite");
    let failCopies = false;
    const store = new SqliteCellStore(path, {
      durability: "full",
      syncFile: (_fd, done) => setImmediate(() => done(null)),
      checkpointWalBytes: 64 * 1024,
      onBackgroundError: (error) => errors.push(error),
      // The copy itself runs; only its flush of the file is made to fail.
      copyLog: async (file) => {
        await WalCheckpointer.get().checkpoint(file);
        if (failCopies) throw new CheckpointFlushError("EIO: i/o error, fsync");
      },
    });
    const cell = new QueueCell({ name: "q", store, clock: new ManualClock() });
    const body = "x".repeat(4_000);
    for (let i = 0; i < 20; i++) await cell.send([text(body)]);
    failCopies = true;
    let answered = 20;
    // Sends go on until the failure is seen: each is answered once its log flush has worked.
    for (let i = 0; i < 200 && store.failed === undefined; i++) {
      // The failure can land between the check above and this send's commit: the send is then
      // refused, having written nothing, and is not counted.
      const refused = await cell.send([text(body)]).then(
        () => false,
        (error: unknown) => {
          if (!isCellError(error, "ERR_STORAGE")) throw error;
          expect((error as Error).message).toContain("nothing of this call was written");
          return true;
        },
      );
      if (refused) break;
      answered++;
      if (errors.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await until(() => store.failed !== undefined, "the failed checkpoint flush");
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/flushing its database file to disk failed \(EIO: i\/o error, fsync\), so it takes no more writes until celld is restarted/);
    await expect(cell.send([text("after")])).rejects.toThrow(/takes no more writes until celld is restarted/);
    await cell.close();
    // The log was neither started over nor deleted: the next open copies all of it again.
    expect(statSync(`${path}-wal`).size).toBeGreaterThan(0);
    const again = new QueueCell({ name: "q", path, clock: new ManualClock() });
    expect((await again.counts()).ready).toBe(answered);
    await again.send([text("after restart")]);
    await again.close();
  });

  it("a file that is not a cell's database is refused as ERR_STORAGE naming the file, not as an internal error", async () => {
    const path = join(tempDir(), "q.sqlite");
    writeFileSync(path, "not a database, but a file of this name ".repeat(200));
    const error = (() => {
      try {
        new SqliteCellStore(path, { durability: "full" });
      } catch (e) {
        return e;
      }
    })();
    expect(isCellError(error, "ERR_STORAGE")).toBe(true);
    expect((error as Error).message).toContain(`the queue's storage failed: opening ${path}: file is not a database (SQLITE_NOTADB)`);
  });

  it("close waits for the last flush, and what it answered is there on reopen", async () => {
    const sync = heldSync();
    const { cell, path } = cellWith(sync.syncFile);
    const send = cell.send([text("kept")]);
    await settled(send);
    const closing = cell.close();
    expect(await settled(closing)).toBe(false);
    sync.finish();
    await closing;
    await send;
    const again = new QueueCell({ name: "q", path, clock: new ManualClock() });
    expect((await again.counts()).ready).toBe(1);
    await again.close();
  });

  it("checkpoints the log once it outgrows the threshold, so it stays bounded", async () => {
    const { cell, path } = cellWith((fd, done) => setImmediate(() => done(null)), { checkpointWalBytes: 64 * 1024 });
    const body = "x".repeat(4_000);
    // The first copies run on the checkpointer's thread while sends go on, starting it as well.
    for (let i = 0; i < 100; i++) await cell.send([text(body)]);
    const index = WalIndex.open(`${path}-shm`);
    try {
      await until(() => index.uncheckpointedBytes() < 64 * 1024, "the first checkpoint");
      // From then on the copies keep up: the log starts over again and again. Sends here do not
      // wait for a real disk, so the log grows faster than the copies' own flushes allow.
      let startsOver = 0;
      let last = index.uncheckpointedBytes();
      for (let i = 0; i < 400; i++) {
        await cell.send([text(body)]);
        const now = index.uncheckpointedBytes();
        if (now < last / 2) startsOver++;
        last = now;
      }
      // 400 more sends wrote some 5 MiB of log. How often it starts over depends on how much CPU the
      // thread gets: 2 to 20 times in runs on a loaded machine, and at load 7 once, after the log
      // had reached 6.4 MiB, so a bound in bytes (4 MiB, asserted here until 2026-12-07) fails on a
      // starved machine. That the copies catch up and the log starts over does not.
      expect(startsOver).toBeGreaterThanOrEqual(1);
    } finally {
      index.close();
    }
    expect((await cell.counts()).ready).toBe(500);
    await cell.close();
    const again = new QueueCell({ name: "q", path, clock: new ManualClock() });
    expect((await again.counts()).ready).toBe(500);
    await again.close();
  });
});

describe("the checkpoint thread", () => {
  /** The process's checkpointer and its thread, read through its private fields. */
  const running = (): { worker: Worker } | undefined =>
    (WalCheckpointer as unknown as { shared?: { worker: Worker } }).shared;

  it("is replaced at the next checkpoint after it dies; copies it held are failed, and nothing is lost", async () => {
    const errors: unknown[] = [];
    const path = join(tempDir(), "q.sqlite");
    const store = new SqliteCellStore(path, {
      durability: "full",
      syncFile: (_fd, done) => setImmediate(() => done(null)),
      checkpointWalBytes: 64 * 1024,
      onBackgroundError: (error) => errors.push(error),
    });
    const cell = new QueueCell({ name: "q", store, clock: new ManualClock() });
    const body = "x".repeat(4_000);
    const index = WalIndex.open(`${path}-shm`);
    try {
      for (let i = 0; i < 100; i++) await cell.send([text(body)]);
      await until(() => index.uncheckpointedBytes() < 64 * 1024, "the first checkpoint");
      const first = WalCheckpointer.get();
      expect(running()).toBe(first);

      // A copy asked for as the thread dies is answered or failed, never left waiting.
      const copy = first.checkpoint(path).then(
        () => "copied",
        (error: Error) => error.message,
      );
      await running()!.worker.terminate();
      expect(await copy).toMatch(/^(copied|the checkpoint thread exited \(code \d+\))$/);
      await until(() => running() === undefined, "the dead thread to be let go");
      // A caller still holding the dead checkpointer is refused at once.
      await expect(first.checkpoint(path)).rejects.toThrow("the checkpoint thread has stopped");

      // The next checkpoint starts a new thread, and the log is bounded again.
      for (let i = 0; i < 100; i++) await cell.send([text(body)]);
      await until(() => index.uncheckpointedBytes() < 64 * 1024, "a checkpoint on a new thread");
      expect(running()).toBeDefined();
      expect(running()).not.toBe(first);
      for (const error of errors) expect(isCellError(error, "ERR_STORAGE")).toBe(true);
    } finally {
      index.close();
    }
    expect((await cell.counts()).ready).toBe(200);
    await cell.close();
    // The dead thread's connection went with it: the writer's close was the last, so it copied
    // the log into the file and removed it.
    expect(existsSync(`${path}-wal`)).toBe(false);
    const again = new QueueCell({ name: "q", path, clock: new ManualClock() });
    expect((await again.counts()).ready).toBe(200);
    await again.close();
  });
});
