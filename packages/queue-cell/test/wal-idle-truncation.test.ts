import { copyFileSync, existsSync, readdirSync, readlinkSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { ManualClock, QueueCell, SqliteCellStore } from "../src/index.ts";
import { walTruncateIdleMsDefault } from "../src/sqlite-file.ts";
import { CheckpointFlushError, truncationClaim, WalCheckpointer } from "../src/wal-checkpointer.ts";
import { WalIndex } from "../src/wal-index.ts";
import { refs, text, until } from "./cell-harness.ts";
import { tempDir } from "./temp-dir.ts";

const quietMs = walTruncateIdleMsDefault;

/**
 * A cell on a fresh file with durability full and a manual clock. Its log is copied by the real
 * checkpointer's thread; while `held` is set, a copy's answer waits until the test lets it go, so
 * that the test can close, write or checkpoint while it runs.
 */
function openCell(
  options: { path?: string; checkpointWalBytes?: number; truncateLog?: (path: string, claim: Int32Array) => Promise<boolean> } = {},
) {
  const path = options.path ?? join(tempDir(), "q.sqlite");
  const clock = new ManualClock();
  const errors: unknown[] = [];
  const state = { copies: 0, held: false, release: [] as Array<() => void> };
  const store = new SqliteCellStore(path, {
    durability: "full",
    clock,
    ...(options.checkpointWalBytes === undefined ? {} : { checkpointWalBytes: options.checkpointWalBytes }),
    ...(options.truncateLog === undefined ? {} : { truncateLog: options.truncateLog }),
    onBackgroundError: (error) => errors.push(error),
    copyLog: async (file) => {
      state.copies++;
      await WalCheckpointer.get().checkpoint(file);
      if (state.held) await new Promise<void>((resolve) => state.release.push(resolve));
    },
  });
  const cell = new QueueCell({ name: "q", store, clock });
  const walBytes = (): number => (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);
  const letGo = (): void => {
    state.held = false;
    for (const resolve of state.release.splice(0)) resolve();
  };
  return { path, clock, cell, store, errors, state, walBytes, letGo };
}

/** `sends` sends of 100 small messages, all in flight at once (as a burst of producers is). */
async function burst(cell: QueueCell, sends: number, tag = "m"): Promise<string[]> {
  const results = await Promise.all(
    Array.from({ length: sends }, (_, s) => cell.send(Array.from({ length: 100 }, (_, i) => text(`${tag}${s}-${i}`)))),
  );
  return results.flatMap((r) => r.ids);
}

/** Leases and acks everything ready; returns the ids it got. */
async function drain(cell: QueueCell): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const leased = await cell.lease({ max: 100, visibilityTimeoutSeconds: 60 });
    if (leased.length === 0) return ids;
    await cell.ack(refs(leased));
    ids.push(...leased.map((m) => m.id));
  }
}

/** Waits until every frame of the log is in the file: the checkpoint that copies them has ended. */
async function allCopied(path: string): Promise<void> {
  const index = WalIndex.open(`${path}-shm`);
  try {
    await until(() => index.uncheckpointedBytes() === 0, "the checkpoint's end");
  } finally {
    index.close();
  }
}

/** Reopens the file as the next start would, and returns what it holds, ready. */
async function idsAfterReopen(path: string): Promise<string[]> {
  const again = new QueueCell({ name: "q", path, clock: new ManualClock() });
  try {
    const ids: string[] = [];
    for (;;) {
      const leased = await again.lease({ max: 100, visibilityTimeoutSeconds: 60 });
      if (leased.length === 0) return ids;
      ids.push(...leased.map((m) => m.id));
    }
  } finally {
    await again.close();
  }
}

describe("an idle queue's log", () => {
  it("is truncated after a quiet spell, and every message is still there and leasable", async () => {
    const { cell, clock, walBytes, state, errors, path } = openCell();
    const sent = await burst(cell, 100);
    const before = walBytes();
    expect(before).toBeGreaterThan(64 * 1024);

    clock.advance(quietMs - 1);
    expect(state.copies).toBe(0);
    expect(walBytes()).toBe(before);
    clock.advance(1);
    await until(() => walBytes() === 0, "the log's truncation");
    expect(state.copies).toBe(1);

    // The file holds them now; the cell, still open, hands every one of them out.
    expect((await cell.counts()).ready).toBe(10_000);
    const got = await drain(cell);
    expect(new Set(got)).toEqual(new Set(sent));
    expect(errors).toEqual([]);
    await cell.close();
    expect(await idsAfterReopen(path)).toEqual([]);
  });

  it("holds messages on disk across the truncation: a reopen without this cell's close finds them all", async () => {
    const { cell, clock, walBytes, path } = openCell();
    const sent = await burst(cell, 20);
    clock.advance(quietMs);
    await until(() => walBytes() === 0, "the log's truncation");
    // A second connection reads the file with the log empty: the frames are in the file itself.
    const index = WalIndex.open(`${path}-shm`);
    try {
      expect(index.uncheckpointedBytes()).toBe(0);
    } finally {
      index.close();
    }
    await cell.close();
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set(sent));
  });

  it("left by a crash is truncated a quiet spell after the open that copied it, with nothing written since", async () => {
    const dir = tempDir();
    const first = openCell({ path: join(dir, "q.sqlite") });
    const sent = await burst(first.cell, 20);
    // The files as a crash leaves them: the log holds the commits, not yet copied.
    for (const suffix of ["", "-wal"]) copyFileSync(join(dir, `q.sqlite${suffix}`), join(dir, `crashed.sqlite${suffix}`));
    await first.cell.close();
    const { cell, clock, walBytes, path } = openCell({ path: join(dir, "crashed.sqlite") });
    expect(walBytes()).toBeGreaterThan(0);
    clock.advance(quietMs);
    await until(() => walBytes() === 0, "the log's truncation");
    await cell.close();
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set(sent));
  });

  it("is not truncated while the queue is written steadily, and is once it stops", async () => {
    const { cell, clock, walBytes, state } = openCell();
    await burst(cell, 10);
    let last = walBytes();
    for (let i = 0; i < 20; i++) {
      clock.advance(quietMs - 1000);
      await cell.send([text(`steady ${i}`)]);
      // Never given back between writes: the log only grows (no checkpoint below 16 MiB).
      expect(walBytes()).toBeGreaterThanOrEqual(last);
      last = walBytes();
    }
    expect(state.copies).toBe(0);
    clock.advance(quietMs);
    await until(() => walBytes() === 0, "the log's truncation");
    expect((await cell.counts()).ready).toBe(1020);
    await cell.close();
  });

  it("is left at its working size when a commit comes while the copy runs, and truncated after the next quiet spell", async () => {
    const { cell, clock, walBytes, state, path, letGo } = openCell();
    await burst(cell, 10);
    state.held = true;
    clock.advance(quietMs);
    await until(() => state.release.length === 1, "the copy on the checkpointer's thread");
    await cell.send([text("woke up")]);
    letGo();
    await allCopied(path);
    expect(walBytes()).toBeGreaterThan(0);
    clock.advance(quietMs);
    await until(() => walBytes() === 0, "the log's truncation");
    expect((await cell.counts()).ready).toBe(1001);
    await cell.close();
  });

  it("racing a close loses nothing: the close copies the log and deletes it, the copy's end does nothing", async () => {
    const { cell, clock, state, errors, path, letGo } = openCell();
    const sent = await burst(cell, 20);
    state.held = true;
    clock.advance(quietMs);
    await until(() => state.release.length === 1, "the copy on the checkpointer's thread");
    await cell.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    letGo();
    await new Promise((resolve) => setImmediate(resolve));
    // A close stops the watch: time going on starts nothing more.
    clock.advance(10 * quietMs);
    expect(state.copies).toBe(1);
    expect(errors).toEqual([]);
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set(sent));
  });

  it("racing a close while the thread is still copying loses nothing", async () => {
    const { cell, clock, errors, path } = openCell();
    const sent = await burst(cell, 50);
    clock.advance(quietMs);
    // No wait: the close asks the thread to let go of the file after the copy it was asked for.
    await cell.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    expect(errors).toEqual([]);
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set(sent));
  });

  it("waits for a background checkpoint running when the quiet spell ends, and truncates when it ends, losing nothing", async () => {
    const { cell, clock, walBytes, state, errors, path, letGo } = openCell({ checkpointWalBytes: 64 * 1024 });
    state.held = true;
    const sent = await burst(cell, 100);
    // The log passed 64 KiB: a checkpoint's copy runs, its answer held.
    await until(() => state.release.length === 1, "the size-driven checkpoint");
    clock.advance(quietMs);
    // The quiet spell found the checkpoint running and started no copy of its own.
    expect(state.copies).toBe(1);
    expect(walBytes()).toBeGreaterThan(0);
    letGo();
    // No more time needs to pass: the quiet spell is over already.
    await until(() => walBytes() === 0, "the log's truncation");
    expect(state.copies).toBe(1);
    expect(errors).toEqual([]);
    expect(new Set(await drain(cell))).toEqual(new Set(sent));
    await cell.close();
  });

  it("once truncated, leaves the checkpointer's thread holding no connection to it: a quiet queue costs no more descriptors than before its burst", async () => {
    // Only those on the cells' own files: under load the test's process opens and closes others
    // (3 of 6 runs counted 12 against the bound of 10 when every descriptor was counted).
    const descriptors = (): number =>
      readdirSync("/proc/self/fd").filter((fd) => {
        let target: string;
        try {
          target = readlinkSync(`/proc/self/fd/${fd}`);
        } catch {
          return false; // closed since the listing
        }
        return cells.some(({ path }) => target.startsWith(path));
      }).length;
    // One queue through a truncation first, so that the thread and its own descriptors are counted
    // in the base.
    const first = openCell();
    await burst(first.cell, 10);
    first.clock.advance(quietMs);
    await until(() => first.walBytes() === 0, "the first log's truncation");
    const cells = Array.from({ length: 10 }, () => openCell());
    for (const { cell } of cells) await burst(cell, 10);
    const base = descriptors();
    for (const { clock } of cells) clock.advance(quietMs);
    await until(() => cells.every(({ walBytes }) => walBytes() === 0), "every log's truncation");
    // Each may keep one: SQLite holds a closed connection's descriptor of a file while another
    // connection of the process has a lock on it, the writer's here, until that one closes too.
    // Kept, each connection held three (database, log, and the thread's own for its flushes).
    // The thread lets go of a file just after its log reads empty, so the count is waited for
    // (on a loaded machine it read 12 at that instant); a connection kept would never reach it.
    await until(() => descriptors() - base <= cells.length, `at most ${cells.length} descriptors more than before the burst`);
    expect(descriptors() - base).toBeLessThanOrEqual(cells.length);
    for (const { cell, errors } of [first, ...cells]) {
      expect(errors).toEqual([]);
      expect(await drain(cell)).toHaveLength(10 * 100);
      await cell.close();
    }
  });

  it("makes a send arriving during the truncation wait for it without holding the event loop, and loses nothing", async () => {
    // The thread holds the log's write lock from its copy to its cut. Here a second connection of
    // this thread holds it until the test lets go, then the real truncation runs: before, the
    // send's commit waited for the lock in SQLite's busy handler on the event loop, which the test
    // could never get back to let go of it (the send failed SQLITE_BUSY after 5 s).
    const gate: { letGo?: () => void } = {};
    const { cell, clock, store, walBytes, errors, path } = openCell({
      truncateLog: async (file, claim) => {
        // As the thread does when it starts: the send's group then waits for it.
        Atomics.store(claim, 0, truncationClaim.started);
        const holder = new Database(file);
        holder.exec("BEGIN IMMEDIATE");
        await new Promise<void>((resolve) => (gate.letGo = resolve));
        holder.exec("COMMIT");
        holder.close();
        return WalCheckpointer.get().truncate(file, claim);
      },
    });
    const sent = await burst(cell, 20);
    clock.advance(quietMs);
    await until(() => gate.letGo !== undefined, "the truncation");
    expect(store.writesHeld()).toBeInstanceOf(Promise);
    let answered = false;
    const during = cell.send([text("during")]).then((result) => {
      answered = true;
      return result.ids;
    });
    const loopStarted = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(Date.now() - loopStarted).toBeLessThan(1000);
    expect(answered).toBe(false);
    gate.letGo!();
    const ids = await during;
    expect(store.writesHeld()).toBeUndefined();
    // The truncation ran before the send's commit, which started the log again.
    expect(walBytes()).toBeGreaterThan(0);
    expect(errors).toEqual([]);
    expect(new Set(await drain(cell))).toEqual(new Set([...sent, ...ids]));
    await cell.close();
    expect(await idsAfterReopen(path)).toEqual([]);
  });

  it("does not hold a send for a truncation still waiting behind other queues' work on the thread", async () => {
    // One thread serves every queue, one request at a time: a truncation asked for may wait there
    // behind other queues' work, holding nothing yet. A send meanwhile commits at once, and the
    // truncation, of a queue no longer quiet, is not run.
    let asked = false;
    const { cell, clock, store, state, letGo, walBytes, errors, path } = openCell({
      truncateLog: (file, claim) => {
        asked = true;
        return WalCheckpointer.get().truncate(file, claim);
      },
    });
    const other = join(tempDir(), "other.sqlite");
    const busy = new Database(other);
    const holder = new Database(other);
    try {
      const sent = await burst(cell, 20);
      // The quiet spell's copy runs first, with the thread free; its answer is kept back while the
      // thread is given other work.
      state.held = true;
      clock.advance(quietMs);
      await until(() => state.release.length > 0, "the quiet spell's copy");
      busy.pragma("journal_mode = WAL");
      busy.exec("CREATE TABLE t (x); INSERT INTO t VALUES (1)");
      // The other file's truncation waits for this lock in the thread's busy wait, up to 5 s.
      holder.exec("BEGIN IMMEDIATE");
      let aheadAnswered = false;
      const ahead = WalCheckpointer.get()
        .truncate(other)
        .finally(() => (aheadAnswered = true));
      letGo();
      await until(() => asked, "the truncation asked for");
      const { ids } = await cell.send([text("during")]);
      // Before, the send waited for the thread's whole queue: here 5 s, the other file's busy wait.
      expect(aheadAnswered).toBe(false);
      expect(store.writesHeld()).toBeUndefined();
      holder.exec("COMMIT");
      expect(await ahead).toBe(true);
      await until(() => (store as unknown as { truncating?: unknown }).truncating === undefined, "the truncation's answer");
      // Not truncated under the send's commit: the log holds it, and the next quiet spell cuts it.
      expect(walBytes()).toBeGreaterThan(0);
      clock.advance(quietMs);
      await until(() => walBytes() === 0, "the next quiet spell's truncation");
      expect(errors).toEqual([]);
      expect(new Set(await drain(cell))).toEqual(new Set([...sent, ...ids]));
      await cell.close();
      expect(await idsAfterReopen(path)).toEqual([]);
    } finally {
      holder.close();
      busy.close();
    }
  });

  it("closing while a truncation runs writes what was queued once it ends, and loses nothing", async () => {
    const gate: { letGo?: () => void } = {};
    const { cell, clock, path } = openCell({
      truncateLog: async (file, claim) => {
        Atomics.store(claim, 0, truncationClaim.started);
        await new Promise<void>((resolve) => (gate.letGo = resolve));
        return WalCheckpointer.get().truncate(file, claim);
      },
    });
    const sent = await burst(cell, 5);
    clock.advance(quietMs);
    await until(() => gate.letGo !== undefined, "the truncation");
    const during = cell.send([text("during")]);
    const closed = cell.close();
    gate.letGo!();
    const { ids } = await during;
    await closed;
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set([...sent, ...ids]));
  });

  it("refuses a send held by a truncation whose flush then fails, as one arriving after it", async () => {
    // The held group must not be written between the failed flush and the store learning of it:
    // after a failed flush the OS may have dropped pages and report it only once, so a later
    // flush of the log could succeed without them and answer the send as durable.
    const gate: { fail?: () => void } = {};
    const { cell, clock, store, errors, path } = openCell({
      truncateLog: (_file, claim) =>
        new Promise<boolean>((_resolve, reject) => {
          Atomics.store(claim, 0, truncationClaim.started);
          gate.fail = () => reject(new CheckpointFlushError("EIO: i/o error, fsync"));
        }),
    });
    const sent = await burst(cell, 20);
    clock.advance(quietMs);
    await until(() => gate.fail !== undefined, "the truncation");
    const during = cell.send([text("during")]);
    gate.fail!();
    await expect(during).rejects.toThrow(/takes no more writes until celld is restarted/);
    expect(store.failed).toBeDefined();
    expect(errors).toHaveLength(1);
    await cell.close();
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set(sent));
  });

  it("writes a send held by a truncation whose thread dies meanwhile, and loses nothing", async () => {
    // The thread is terminated while its wal_checkpoint(TRUNCATE) waits for a lock another
    // connection holds: the truncation is failed, and the held group must then find the log's
    // locks free, not wait for a dead connection's in SQLite's busy wait on the event loop.
    const running = (): { worker: Worker } | undefined => (WalCheckpointer as unknown as { shared?: { worker: Worker } }).shared;
    const gate: { asked?: Promise<boolean>; holder?: Database.Database; claim?: Int32Array } = {};
    const { cell, clock, store, errors, path } = openCell({
      truncateLog: (file, claim) => {
        gate.holder = new Database(file);
        gate.holder.exec("BEGIN IMMEDIATE");
        gate.claim = claim;
        gate.asked = WalCheckpointer.get().truncate(file, claim);
        return gate.asked;
      },
    });
    const sent = await burst(cell, 20);
    clock.advance(quietMs);
    await until(() => gate.claim !== undefined && Atomics.load(gate.claim, 0) === truncationClaim.started, "the truncation's start");
    const during = cell.send([text("during")]);
    const stopped = running()!.worker.terminate();
    gate.holder!.exec("COMMIT");
    gate.holder!.close();
    await stopped;
    await expect(gate.asked).rejects.toThrow(/the checkpoint thread exited/);
    const loopStarted = Date.now();
    const { ids } = await during;
    expect(Date.now() - loopStarted).toBeLessThan(1000);
    expect(store.writesHeld()).toBeUndefined();
    expect(errors.map(String)).toEqual([expect.stringMatching(/checkpointing its log: the checkpoint thread exited/)]);
    await cell.close();
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set([...sent, ...ids]));
  });

  it("whose truncation's flush failed stops writes and is kept whole for the next open", async () => {
    // What the thread answers when SQLite's flush of the file in wal_checkpoint(TRUNCATE) fails:
    // the copy is not counted as done, and the log is not cut.
    const { cell, clock, store, walBytes, errors, path } = openCell({
      truncateLog: () => Promise.reject(new CheckpointFlushError("EIO: i/o error, fsync")),
    });
    const sent = await burst(cell, 20);
    clock.advance(quietMs);
    await until(() => store.failed !== undefined, "the failed truncation");
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/flushing its database file to disk failed \(EIO: i\/o error, fsync\), so it takes no more writes/);
    await expect(cell.send([text("after")])).rejects.toThrow(/takes no more writes until celld is restarted/);
    // No later quiet spell tries again on a store that failed.
    clock.advance(quietMs * 3);
    expect(errors).toHaveLength(1);
    expect(walBytes()).toBeGreaterThan(0);
    await cell.close();
    expect(walBytes()).toBeGreaterThan(0);
    expect(new Set(await idsAfterReopen(path))).toEqual(new Set(sent));
  });
});
