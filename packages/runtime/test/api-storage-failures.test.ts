/**
 * A queue whose storage fails, as an API client sees it. The disk is "full" for real: the cell's
 * own SQLite connection is capped at the size its file has (max_page_count), so a write that needs
 * a new page fails inside SQLite with SQLITE_FULL, as on a full disk, without root or a small
 * file system.
 */
import BetterSqlite3 from "better-sqlite3";
import type Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { CellError, ManualClock, type QueueCell, type StorageFailure } from "@celld/queue-cell";
import { StorageFailureLog, storageFailureLogWindowMs } from "../src/plugins/storage-failure-log.ts";
import { apiHarness, event, testEnv } from "./api-harness.ts";

/** The cell's SQLite connection (private to its store; reached here only to fill its "disk"). */
function connectionOf(cell: QueueCell): Database.Database {
  return (cell as unknown as { store: { db: Database.Database } }).store.db;
}

/** Makes the queue's disk full, or (`false`) gives it room again. */
async function diskFull(h: Awaited<ReturnType<typeof apiHarness>>, queue: string, full: boolean): Promise<void> {
  const db = connectionOf(await h.registry.open(`${testEnv}/queues/${queue}`));
  // SQLite does not lower the cap below the file's size: 1 means "no page more than now".
  db.pragma(`max_page_count = ${full ? 1 : 1_073_741_823}`);
}

// Larger than any free space left in the file's pages.
const sendBody = { events: [event("big", "x".repeat(100_000), { datacontenttype: "text/plain" })] };

describe("a full disk", () => {
  it("refuses a send with 503, the cell's words and Retry-After; the queue takes sends again once there is room", async () => {
    const h = await apiHarness({ onStorageFailure: () => {} });
    await h.createQueue("jobs");
    await diskFull(h, "jobs", true);
    const refused = await h.call("POST", `${h.queuePath("jobs")}:send`, { body: sendBody });
    expect([refused.status, refused.headers["retry-after"], refused.json]).toEqual([
      503,
      "10",
      {
        error: {
          code: "unavailable",
          message:
            "the queue's storage failed: database or disk is full (SQLITE_FULL); nothing of this call was written, " +
            "and writes resume by themselves once the disk has free space",
        },
      },
    ]);
    await diskFull(h, "jobs", false);
    const sent = await h.call("POST", `${h.queuePath("jobs")}:send`, { body: sendBody });
    expect(sent.status).toBe(200);
    const queue = await h.call("GET", h.queuePath("jobs"));
    expect(queue.json.counts.ready).toBe(1);
  });
});

describe("a queue file of a newer celld's format", () => {
  it("refuses calls with 503 and the cell's words, without Retry-After: no wait makes this celld read it", async () => {
    const h = await apiHarness({ onStorageFailure: () => {} });
    await h.createQueue("jobs");
    const cellName = `${testEnv}/queues/jobs`;
    await h.registry.close(cellName);
    const later = new BetterSqlite3(h.registry.pathOf(cellName));
    later.pragma("user_version = 1000");
    later.close();
    const refused = await h.call("POST", `${h.queuePath("jobs")}:send`, { body: sendBody });
    expect(refused.status).toBe(503);
    expect(refused.headers["retry-after"]).toBeUndefined();
    expect(refused.json.error.message).toContain("written by a newer celld (its format is 1000");
  });
});

describe("the operator's log of storage failures", () => {
  it("has one line per queue and cause however many calls a full disk refuses, naming both, and counts the rest in the next", async () => {
    const lines: string[] = [];
    const h = await apiHarness({ onStorageFailure: (line) => lines.push(line) });
    await h.createQueue("jobs");
    await diskFull(h, "jobs", true);
    for (let i = 0; i < 5; i++) expect((await h.call("POST", `${h.queuePath("jobs")}:send`, { body: sendBody })).status).toBe(503);
    const line =
      `queue "${testEnv}/queues/jobs": storage failed (SQLITE_FULL: database or disk is full); ` +
      "its writes are refused until the disk has free space";
    expect(lines).toEqual([line]);
    h.clock.advance(storageFailureLogWindowMs);
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: sendBody });
    expect(lines).toEqual([line, `${line} (4 more like it since 2026-01-01T00:00:00.000Z)`]);
  });

  it("names each queue that refused a publish for it", async () => {
    const lines: string[] = [];
    const h = await apiHarness({ onStorageFailure: (line) => lines.push(line) });
    for (const queue of ["jobs", "audit", "calm"]) {
      await h.createQueue(queue);
      const sub = await h.call("POST", `/v1/${testEnv}/subscriptions`, { body: { name: queue, queue } });
      expect(sub.status).toBe(201);
    }
    await diskFull(h, "jobs", true);
    await diskFull(h, "audit", true);
    const refused = await h.call("POST", `/v1/${testEnv}/events:publish`, { body: sendBody });
    expect([refused.status, refused.headers["retry-after"], refused.json.error.committed_queues]).toEqual([503, "10", [`${testEnv}/queues/calm`]]);
    expect(lines.map((line) => line.slice(0, line.indexOf(":"))).sort()).toEqual([`queue "${testEnv}/queues/audit"`, `queue "${testEnv}/queues/jobs"`]);
  });

  it("is bounded by a window per queue and cause, on the clock it is given", () => {
    const clock = new ManualClock();
    const lines: string[] = [];
    const log = new StorageFailureLog(clock, (line) => lines.push(line), 60_000);
    const failure = (queue: string, storage: Partial<StorageFailure> = {}) =>
      new CellError("ERR_STORAGE", "words for the caller", {
        storage: { queue, cause: "disk-full", detail: "SQLITE_FULL: database or disk is full", mayHaveTakenEffect: false, writesStopped: false, ...storage },
      });
    for (let i = 0; i < 1000; i++) log.report(failure("jobs"));
    clock.advance(59_999);
    log.report(failure("jobs"));
    expect(lines).toHaveLength(1);
    // Another queue, and another cause of the same queue, have lines of their own at once.
    log.report(failure("mail"));
    const flush = { cause: "io-error", detail: "EIO: i/o error, fdatasync", writesStopped: true } as const;
    log.report(failure("jobs", { ...flush, mayHaveTakenEffect: true }));
    // The refusals after a failed flush are that same failure.
    log.report(failure("jobs", flush));
    clock.advance(1);
    log.report(failure("jobs"));
    expect(lines).toEqual([
      'queue "jobs": storage failed (SQLITE_FULL: database or disk is full); its writes are refused until the disk has free space',
      'queue "mail": storage failed (SQLITE_FULL: database or disk is full); its writes are refused until the disk has free space',
      'queue "jobs": storage failed (EIO: i/o error, fdatasync); it takes no more writes until celld is restarted',
      'queue "jobs": storage failed (SQLITE_FULL: database or disk is full); its writes are refused until the disk has free space ' +
        "(1000 more like it since 2026-01-01T00:00:00.000Z)",
    ]);
  });
});
