/**
 * A queue whose storage fails, as an API client sees it. The disk is "full" for real: the cell's
 * own SQLite connection is capped at the size its file has (max_page_count), so a write that needs
 * a new page fails inside SQLite with SQLITE_FULL, as on a full disk, without root or a small
 * file system.
 */
import type Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { QueueCell } from "@celld/queue-cell";
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
    const h = await apiHarness();
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
