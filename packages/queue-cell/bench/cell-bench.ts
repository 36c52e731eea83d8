/**
 * The cell's own figures, each beside a baseline measured in the same run:
 *   1. durable send of 100-message batches vs raw better-sqlite3 inserting the same rows, 100 per
 *      transaction, same schema and pragmas (target ratio >= 0.5);
 *   2. 256 concurrent single-message sends vs raw one-row commits (group commit; target >= 5);
 *   3. lease+ack with a backlog of 1,000 vs 1,000,000 messages (target >= 0.7).
 * Run: npm run bench -w @celld/queue-cell   (or npm run bench at the root for everything)
 */
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { QueueCell, SqliteCellStore, UlidSource, type NewMessage } from "../src/index.ts";
import { fmt, median, perSecond, ratioLine } from "./bench-stats.ts";

const rounds = Number(process.env.CELLD_BENCH_ROUNDS ?? 5);
const bodyBytes = 200;
const body = new Uint8Array(bodyBytes).fill(120);

function scratch(): { dir: string; done: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "celld-bench-"));
  return { dir, done: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The baseline: the cell's own schema and pragmas, driven directly, no cell around it. */
function rawDb(path: string): { db: Database.Database; insert: Database.Statement } {
  // Opening the store creates exactly the cell's schema; then we drive SQLite by hand.
  new SqliteCellStore(path).close();
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  const insert = db.prepare(
    `INSERT INTO messages (id, state, due_at, sent_at, enqueued_at, bytes, content_type, attributes, body)
     VALUES (?, 0, ?, ?, ?, ?, 'bytes', NULL, ?)`,
  );
  return { db, insert };
}

async function sendBatches(messages: number): Promise<{ cell: number; raw: number }> {
  const s = scratch();
  try {
    const ids = new UlidSource();
    const raw = rawDb(join(s.dir, "raw.sqlite"));
    const rawTx = raw.db.transaction((n: number) => {
      const now = Date.now();
      for (let i = 0; i < n; i++) raw.insert.run(ids.next(now), now, now, now, bodyBytes, body);
    });
    let start = process.hrtime.bigint();
    for (let sent = 0; sent < messages; sent += 100) rawTx(100);
    const rawRate = perSecond(messages, start);
    raw.db.close();

    const cell = new QueueCell({ name: "bench", path: join(s.dir, "cell.sqlite") });
    const batch = Array.from({ length: 100 }, () => ({ body, contentType: "bytes" }));
    start = process.hrtime.bigint();
    for (let sent = 0; sent < messages; sent += 100) await cell.send(batch);
    const cellRate = perSecond(messages, start);
    await cell.close();
    return { cell: cellRate, raw: rawRate };
  } finally {
    s.done();
  }
}

async function concurrentSingles(calls: number, groups: number): Promise<{ cell: number; raw: number }> {
  const s = scratch();
  try {
    const ids = new UlidSource();
    const raw = rawDb(join(s.dir, "raw.sqlite"));
    const rawCommit = raw.db.transaction(() => {
      const now = Date.now();
      raw.insert.run(ids.next(now), now, now, now, bodyBytes, body);
    });
    let start = process.hrtime.bigint();
    for (let i = 0; i < calls; i++) rawCommit();
    const rawRate = perSecond(calls, start);
    raw.db.close();

    const cell = new QueueCell({ name: "bench", path: join(s.dir, "cell.sqlite") });
    const message = [{ body, contentType: "bytes" }];
    start = process.hrtime.bigint();
    for (let g = 0; g < groups; g++) {
      await Promise.all(Array.from({ length: calls }, () => cell.send(message)));
    }
    const cellRate = perSecond(calls * groups, start);
    await cell.close();
    return { cell: cellRate, raw: rawRate };
  } finally {
    s.done();
  }
}

/** Fills a cell quickly (no fsync per group), then measures durable lease+ack on it. */
async function leaseAck(backlog: number, work: number): Promise<number> {
  const s = scratch();
  try {
    const path = join(s.dir, "cell.sqlite");
    const store = new SqliteCellStore(path, { durability: "off" });
    const ids = new UlidSource();
    const now = Date.now();
    for (let filled = 0; filled < backlog; ) {
      const n = Math.min(10_000, backlog - filled);
      const rows: NewMessage[] = Array.from({ length: n }, () => ({
        id: ids.next(now),
        dueAt: now,
        sentAt: now,
        enqueuedAt: now,
        contentType: "bytes",
        attributes: null,
        body,
      }));
      store.transaction(() => store.insert(rows));
      filled += n;
    }
    store.close();
    // A backlog at rest: without this, the kernel is still writing the fill back while the
    // measured commits wait on fsync, which times the fill, not the backlog.
    const fd = openSync(path, "r");
    fsyncSync(fd);
    closeSync(fd);
    const cell = new QueueCell({ name: "bench", path });
    await cell.counts();
    const start = process.hrtime.bigint();
    let done = 0;
    while (done < work) {
      const leased = await cell.lease({ max: 100 });
      await cell.ack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
      done += leased.length;
    }
    const rate = perSecond(done, start);
    await cell.close();
    return rate;
  } finally {
    s.done();
  }
}

export async function runCellBench(log: (line: string) => void = console.log): Promise<void> {
  log(`queue-cell: ${rounds} rounds each, medians; bodies ${bodyBytes} B; WAL, durable before answering (cell: fdatasync of the log; raw baseline: synchronous=FULL)`);
  const send = { cell: [] as number[], raw: [] as number[] };
  const singles = { cell: [] as number[], raw: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    const a = await sendBatches(20_000);
    send.cell.push(a.cell);
    send.raw.push(a.raw);
    const b = await concurrentSingles(256, 8);
    singles.cell.push(b.cell);
    singles.raw.push(b.raw);
  }
  log(ratioLine("  send, 100-message batches (cell vs raw SQLite, 100 rows/commit)", median(send.cell), median(send.raw), ">= 0.5"));
  log(ratioLine("  256 concurrent 1-message sends (cell vs raw 1-row commits)", median(singles.cell), median(singles.raw), ">= 5"));

  const small: number[] = [];
  const large: number[] = [];
  const bigBacklog = Number(process.env.CELLD_BENCH_BIG_BACKLOG ?? 1_000_000);
  const leaseRounds = Math.max(3, Math.min(rounds, 3));
  for (let r = 0; r < leaseRounds; r++) small.push(await leaseAck(1_000, 1_000));
  // Filling a million rows dominates; one filled cell, several measured passes over it would
  // drain it, so each round fills anew but only three rounds run.
  for (let r = 0; r < leaseRounds; r++) large.push(await leaseAck(bigBacklog, 5_000));
  log(
    ratioLine(
      `  lease(100)+ack with backlog ${fmt(bigBacklog)} vs 1,000`,
      median(large),
      median(small),
      ">= 0.7",
    ),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await runCellBench();
}
