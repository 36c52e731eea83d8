/**
 * Child process of the crash test: sends, leases and acks on one cell as fast as it can, printing
 * "sent <id>" after each send resolved, "acking <ids>" before each ack and "acked <id>" after each
 * ack resolved. The parent kills it with SIGKILL at a random moment and checks the file against
 * what was printed. The log is checkpointed every 256 KiB (argv[3]) rather than every 16 MiB, so
 * kills also land in and around checkpoints. With CELLD_CRASH_COMPACT=1 the file is rewritten without
 * its free pages whenever any are free (see file-compaction.ts), and the consumer leases 100 at a
 * time so the backlog stays small enough for that: kills land in and around those rewrites too.
 * With CELLD_CRASH_IDLE=1 producers and consumer all stop for 10 ms of every 30, and the log is
 * truncated after 2 ms without a commit (see walTruncateIdleMsDefault): kills land in and around
 * those truncations, and in the commits that start the log again after them. It prints
 * "truncating" when it asks the checkpointer's thread to truncate and "truncated" when it answered.
 * A kill on a timer seldom lands while the thread truncates (the cut of a small log takes well under
 * a millisecond of every 30), so with CELLD_CRASH_TRUNCATE_KILL="<n> <us> <late>" the child kills
 * itself at its n-th truncation, `us` microseconds after asking for it, without letting the event
 * loop run meanwhile; it prints "killing <bytes of log>" first, so the parent knows whether the
 * log was cut yet. With late=1, the copies of the log before that truncation are skipped: the
 * frames of the sends since the last truncation are then copied by the truncation itself, with
 * both flushes, under the kill. (A send cannot commit while the thread truncates: its group waits
 * for the truncation, or, before the thread starts it, cancels it; see SqliteFile.writesHeld.)
 * With CELLD_CRASH_THREADS=1, argv[2] is a data directory and the cell "crash" is opened through a
 * ThreadedCellRegistry of two threads (with its default store, so none of the modes above): every
 * call crosses to the cell's thread and back, and "sent"/"acked" are printed when the main thread
 * has the answer, so the kill also lands between a commit on the thread and its answer on main.
 */
import { statSync } from "node:fs";
import { QueueCell, SqliteCellStore, ThreadedCellRegistry, type Cell } from "../src/index.ts";
import { WalCheckpointer } from "../src/wal-checkpointer.ts";

const path = process.argv[2]!;
const checkpointWalBytes = Number(process.argv[3] ?? 256 * 1024);
const compact = process.env.CELLD_CRASH_COMPACT === "1";
const idle = process.env.CELLD_CRASH_IDLE === "1";
const [killAtTruncation = 0, killAfterUs = 0, killLate = 0] = (process.env.CELLD_CRASH_TRUNCATE_KILL ?? "0 0 0").split(" ").map(Number);
let truncations = 0;
const threaded = process.env.CELLD_CRASH_THREADS === "1";
const cell: Cell = threaded ? await openThreaded() : new QueueCell({ name: "crash", store: openStore() });

async function openThreaded(): Promise<Cell> {
  const registry = new ThreadedCellRegistry({
    dataDir: path,
    threads: 2,
    durability: "full",
    onBackgroundError: (error) => process.stderr.write(`background error: ${String(error)}\n`),
  });
  return registry.open("crash");
}

function openStore(): SqliteCellStore {
  return new SqliteCellStore(path, {
    durability: "full",
    checkpointWalBytes,
    ...(compact ? { compaction: { freeBytesMin: 32 * 1024, liveBytesMax: 8 * 1024 * 1024 } } : {}),
    ...(idle ? { walTruncateIdleMs: 2, truncateLog, copyLog } : {}),
    onBackgroundError: (error) => process.stderr.write(`background error: ${String(error)}\n`),
  });
}

function out(line: string): void {
  // Synchronous write: a line printed is a line the parent will read, even if we die next.
  process.stdout.write(`${line}\n`);
}

async function copyLog(file: string): Promise<void> {
  // Skipped, a copy changes nothing on disk: the store's RESTART or the next truncation copies all.
  if (killLate === 1 && truncations === killAtTruncation - 1) return;
  await WalCheckpointer.get().checkpoint(file);
}

async function truncateLog(file: string, claim: Int32Array): Promise<boolean> {
  if (++truncations === killAtTruncation) {
    out("truncating");
    void WalCheckpointer.get().truncate(file, claim);
    // The thread truncates while this one spins: the event loop never learns that it answered.
    const until = performance.now() + killAfterUs / 1000;
    while (performance.now() < until);
    out(`killing ${statSync(`${file}-wal`).size}`);
    process.kill(process.pid, "SIGKILL");
  }
  out("truncating");
  const done = await WalCheckpointer.get().truncate(file, claim);
  out("truncated");
  return done;
}

/** With `idle`, waits out the quiet third of each 30 ms, when nobody writes. */
async function quietSpell(): Promise<void> {
  if (!idle) return;
  const phase = performance.now() % 30;
  if (phase >= 20) await new Promise((resolve) => setTimeout(resolve, 30 - phase));
}

async function sendSome(worker: number, i: number): Promise<void> {
  const n = 1 + ((worker + i) % 7);
  const messages = Array.from({ length: n }, () => ({ body: new Uint8Array(64 + (i % 200)), contentType: "bytes" }));
  const sent = await cell.send(messages);
  out(`sent ${sent.ids.join(" ")}`);
}

async function producer(worker: number): Promise<void> {
  for (let i = 0; ; i++) {
    await quietSpell();
    await sendSome(worker, i);
  }
}

async function consumer(): Promise<void> {
  for (;;) {
    await quietSpell();
    const leased = await cell.lease({ max: compact ? 100 : 10, visibilityTimeoutSeconds: 600 });
    if (leased.length === 0) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      continue;
    }
    // Announced before the ack: once the ack commits they may be gone, printed or not.
    out(`acking ${leased.map((m) => m.id).join(" ")}`);
    const result = await cell.ack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
    if (result.staleLeases.length > 0) throw new Error("a fresh lease came back stale");
    out(`acked ${leased.map((m) => m.id).join(" ")}`);
  }
}

out("ready");
void Promise.all([...Array.from({ length: 16 }, (_, w) => producer(w)), consumer()]).catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
