import { statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ManualClock, QueueCell, SqliteCellStore, type LeasedMessage } from "../src/index.ts";
import type { CompactionBounds } from "../src/file-compaction.ts";
import { tempDir } from "./temp-dir.ts";

// Small bounds, so that a few megabytes show what a large backlog would.
const bounds: CompactionBounds = { freeBytesMin: 1024 * 1024, liveBytesMax: 256 * 1024 };
const kilobyte = new Uint8Array(1000).fill(7);

function openCell(path: string, compaction: CompactionBounds = bounds) {
  const errors: unknown[] = [];
  // The log is copied into the file every 256 KiB, not 16 MiB: the file, not its log, holds the rows.
  const store = new SqliteCellStore(path, {
    durability: "full",
    compaction,
    checkpointWalBytes: 256 * 1024,
    onBackgroundError: (error) => errors.push(error),
  });
  return { cell: new QueueCell({ name: "q", store, clock: new ManualClock() }), errors };
}

/** `sends` sends of 100 messages of 1 KB: 100 KB each. */
async function fill(cell: QueueCell, sends: number): Promise<void> {
  for (let i = 0; i < sends; i++) {
    await cell.send(Array.from({ length: 100 }, () => ({ body: kilobyte, contentType: "bytes" })));
  }
}

/** Leases and acks all but `keep` of the messages due (not the delayed). */
async function drain(cell: QueueCell, keep = 0): Promise<LeasedMessage[]> {
  const acked: LeasedMessage[] = [];
  for (;;) {
    const { ready } = await cell.counts();
    if (ready <= keep) return acked;
    const leased = await cell.lease({ max: Math.min(100, ready - keep), visibilityTimeoutSeconds: 60 });
    await cell.ack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
    acked.push(...leased);
  }
}

/** The database file's size once the checkpointer's thread has had time to copy and cut it. */
async function sizeSettledBelow(path: string, bytes: number, ms = 10_000): Promise<number> {
  const end = Date.now() + ms;
  for (;;) {
    const size = statSync(path).size;
    if (size < bytes || Date.now() > end) return size;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("giving a queue file's free space back", () => {
  it("shrinks the file once its backlog is gone, and the queue goes on working", async () => {
    const path = join(tempDir(), "q.sqlite");
    const { cell, errors } = openCell(path);
    await fill(cell, 40);
    await drain(cell);
    // 4 MB of messages came and went; the file's pages for them are free now.
    expect(await sizeSettledBelow(path, 512 * 1024)).toBeLessThan(512 * 1024);
    const sent = await cell.send([{ body: kilobyte, contentType: "bytes" }]);
    const [leased] = await cell.lease({ max: 10, visibilityTimeoutSeconds: 60 });
    expect(leased?.id).toBe(sent.ids[0]);
    await cell.close();
    expect(errors).toEqual([]);
  });

  it("shrinks it after a backlog of a few large messages is gone", async () => {
    const path = join(tempDir(), "q.sqlite");
    const { cell, errors } = openCell(path);
    const large = new Uint8Array(100_000).fill(9);
    for (let i = 0; i < 150; i++) await cell.send([{ body: large, contentType: "bytes" }]);
    expect(statSync(path).size).toBeGreaterThan(10_000_000);
    await drain(cell);
    expect(await sizeSettledBelow(path, 512 * 1024)).toBeLessThan(512 * 1024);
    await cell.close();
    expect(errors).toEqual([]);
  });

  it("looks again when the backlog is gone if the last look found it in the way", async () => {
    const path = join(tempDir(), "q.sqlite");
    const large = new Uint8Array(100_000).fill(9);
    const first = openCell(path, { freeBytesMin: Number.MAX_SAFE_INTEGER, liveBytesMax: 0 });
    for (let i = 0; i < 150; i++) await first.cell.send([{ body: large, contentType: "bytes" }]);
    await drain(first.cell, 50);
    await first.cell.close();
    expect(statSync(path).size).toBeGreaterThan(10_000_000);

    // The open's look (at the lease's flush) finds 10 MB free and 5 MB in use; the 50 acks after
    // it are too few to look for on their own.
    const second = openCell(path);
    const leased = await second.cell.lease({ max: 50, visibilityTimeoutSeconds: 60 });
    expect(statSync(path).size).toBeGreaterThan(10_000_000);
    await second.cell.ack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
    expect(await sizeSettledBelow(path, 512 * 1024)).toBeLessThan(512 * 1024);
    await second.cell.close();
    expect([...first.errors, ...second.errors]).toEqual([]);
  });

  it("keeps every message still in the file, with its id, body and delay", async () => {
    const path = join(tempDir(), "q.sqlite");
    // Never compacted while filling: its free space is what an older celld would have left.
    const first = openCell(path, { freeBytesMin: Number.MAX_SAFE_INTEGER, liveBytesMax: 0 });
    await fill(first.cell, 40);
    const kept = await first.cell.send([{ body: new TextEncoder().encode("kept"), contentType: "text" }], { delaySeconds: 60 });
    await drain(first.cell);
    await first.cell.close();
    const before = statSync(path).size;
    expect(before).toBeGreaterThan(3_000_000);

    // An open looks at its first flush: one delayed message is all that is in use.
    const second = openCell(path);
    const fresh = await second.cell.send([{ body: kilobyte, contentType: "bytes" }]);
    expect(await sizeSettledBelow(path, 512 * 1024)).toBeLessThan(512 * 1024);
    await second.cell.close();

    const clock = new ManualClock();
    const cell = new QueueCell({ name: "q", store: new SqliteCellStore(path, { durability: "full" }), clock });
    expect(await cell.lease({ max: 10, visibilityTimeoutSeconds: 600 })).toMatchObject([{ id: fresh.ids[0] }]);
    clock.advance(60_000);
    const leased = await cell.lease({ max: 10, visibilityTimeoutSeconds: 60 });
    expect(leased.map((m) => [m.id, new TextDecoder().decode(m.body)])).toEqual([[kept.ids[0], "kept"]]);
    await cell.close();
    expect([...first.errors, ...second.errors]).toEqual([]);
  });

  it("leaves a file alone while more of it is in use than the rewrite may copy", async () => {
    const path = join(tempDir(), "q.sqlite");
    const { cell, errors } = openCell(path);
    await fill(cell, 40);
    // 500 KB stays: over the 256 KB the rewrite may copy.
    await drain(cell, 500);
    await cell.send([{ body: kilobyte, contentType: "bytes" }]);
    const size = statSync(path).size;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(statSync(path).size).toBe(size);
    expect(size).toBeGreaterThan(3_000_000);
    expect((await cell.counts()).ready).toBe(501);
    await cell.close();
    expect(errors).toEqual([]);
  });
});
