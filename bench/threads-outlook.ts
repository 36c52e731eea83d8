/**
 * What `npm run bench threads` expects of a larger machine, worked out from the run's own CPU per
 * message (a projection, printed as one): which thread caps the aggregate with every cell on the
 * main thread, which with cells on worker threads, and how many cores it takes to get there.
 */
import { fmt, median } from "../packages/queue-cell/bench/bench-stats.ts";
import { batchMessages } from "./queue-loops.ts";
import { totalMs, type CpuMs } from "./thread-cpu.ts";
import { medianRun } from "./threads-report.ts";
import type { RunFigures } from "./threads-run.ts";

const whereWorkRuns =
  "  stays on the main thread: here, the producers' and consumers' own loops; in a host, also HTTP, the front door, the sockets to workerd, " +
  "the bindings' decoding and the metrics; and, for every call, its hop to the cell's thread (the call and its answer copied across a " +
  "MessagePort). Moves to the cell threads: SQLite's statements, the write loop and its group commits, leases, acks and the cells' " +
  "maintenance. The fdatasync ran off the main thread already, on libuv's thread pool, which worker threads share (UV_THREADPOOL_SIZE, " +
  "4 by default, bounds the flushes in flight across all cells; each cell flushes its own WAL, and a disk that takes one flush at a time " +
  "caps the aggregate whatever the threads).";

/** µs of `cpu` per message acked in `run`. */
function perMessageUs(run: RunFigures, cpu: CpuMs): number {
  return (totalMs(cpu) * 1000) / (run.ackedPerSecond * run.seconds);
}

/**
 * How busy a thread was: below a full core, the rate was held by waits (each producer and consumer
 * awaits its commit's flush), and more queues raise it until that thread is full.
 */
function busyNote(run: RunFigures, cpu: CpuMs): string {
  const busy = Math.round((100 * totalMs(cpu)) / (run.seconds * 1000));
  return busy >= 90
    ? `Here it was ${busy}% busy: at its ceiling.`
    : `Here it was ${busy}% busy: the rate was held by waits (every call awaits its flush), not by that thread, and more busy queues raise it toward the ceiling.`;
}

export function outlookLines(runs: readonly RunFigures[], cores: number): string[] {
  const most = Math.max(...runs.map((r) => r.queues));
  // The ceilings from the runs with the most calls in flight: the main thread is busiest there.
  const busiest = Math.max(...runs.map((r) => r.inFlight));
  const lines = [`what a larger machine should show, and why (a projection from this run's figures, not a measurement):`, whereWorkRuns];
  const unthreadedRuns = runs.filter((r) => r.queues === most && r.inFlight === busiest && r.placement.threads === 0);
  const threadedRuns = runs.filter((r) => r.queues === most && r.inFlight === busiest && r.placement.threads > 0);
  const unthreaded = medianRun(unthreadedRuns);
  if (unthreaded.main === undefined) return [...lines, "  (no /proc here: no CPU per thread to project from)"];
  const m0 = perMessageUs(unthreaded, unthreaded.main);
  const where = `${most} queues${busiest > 1 ? `, ${busiest} calls in flight each way a queue` : ""}`;
  lines.push(
    `  unthreaded, ${where}: the main thread spends ${fmt(m0)} µs per message (loops and cells together), so the aggregate stays under ` +
      `${fmt(1e6 / m0)} msg/s however many cores and queues there are: one thread does all of it. ${busyNote(unthreaded, unthreaded.main)}`,
  );
  if (threadedRuns.length === 0) return [...lines, "  threaded: not measured on this branch."];
  const threaded = medianRun(threadedRuns);
  if (threaded.main === undefined || threaded.cellThreads.some((c) => c === undefined)) return [...lines, "  threaded: no CPU per thread to project from."];
  lines.push(threadedCeiling(threaded, m0, where), callTimeLine(runs.filter((r) => r.inFlight === 1)));
  lines.push(
    `  here: ${cores} cores shared with other work, so the cell threads and the main thread did not each have a core of their own, and the ` +
      `threaded runs had only what was left of a second core after the machine's other work (see the line above).`,
  );
  return lines;
}

/** The threaded aggregate's CPU ceiling: the main thread's share per message, and the cell threads' to fill it. */
function threadedCeiling(threaded: RunFigures, m0: number, where: string): string {
  const m1 = perMessageUs(threaded, threaded.main!);
  const c1 = threaded.cellThreads.reduce((sum, c) => sum + perMessageUs(threaded, c!), 0);
  const threadsToFill = Math.ceil(c1 / m1);
  return (
    `  threaded, ${where}: the main thread spends ${fmt(m1)} µs per message and the cell threads ${fmt(c1)} µs between them. One cell ` +
    `thread carries up to ${fmt(1e6 / c1)} msg/s on a core of its own; the main thread caps the aggregate at ${fmt(1e6 / m1)} msg/s, reached ` +
    `with about ${threadsToFill} busy cell thread${threadsToFill === 1 ? "" : "s"}. So once the load would keep an unthreaded main thread ` +
    `full (many busy queues, or many calls in flight), on a machine with ${threadsToFill + 1} or more free cores, expect up to about ` +
    `${(m0 / m1).toFixed(1)}× the unthreaded aggregate (${fmt(m0)} / ${fmt(m1)} µs on the main thread); more threads than that add nothing ` +
    `until the main thread's own work shrinks or is split (more host processes). ${busyNote(threaded, threaded.main!)} One queue never uses ` +
    `more than one cell thread: its cell has a single writer.`
  );
}

/**
 * What a producer that awaits each call waits, unthreaded and threaded, at one queue: the hop to
 * the cell's thread and back is added to every call, and no number of cores takes it away.
 */
function callTimeLine(runs: readonly RunFigures[]): string {
  const callMs = (threaded: boolean): number => {
    const mine = runs.filter((r) => r.queues === 1 && (r.placement.threads > 0) === threaded);
    return median(mine.map((r) => (1000 * batchMessages) / r.sentPerSecond));
  };
  const [alone, hopped] = [callMs(false), callMs(true)];
  return (
    `  but a queue whose producer awaits each call is held by the call's time, not by cores: one sendBatch(${batchMessages}) took ` +
    `${alone.toFixed(2)} ms unthreaded and ${hopped.toFixed(2)} ms on a cell thread (1 queue, medians), the hop to the thread and back ` +
    `(the call and its answer copied through a MessagePort: a send's bodies go over, a lease's come back) ${hopped > alone ? `adding ${(hopped - alone).toFixed(2)} ms` : "adding nothing measurable"}. ` +
    `Threads raise the aggregate only where the main thread, not the calls' round trips, was the limit.`
  );
}
