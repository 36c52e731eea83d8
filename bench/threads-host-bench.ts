/**
 * Cells on worker threads through the whole host (issue 34, "More than one core"): Workers in
 * real workerd producing to 1, 2 and 4 queues at once (one request per queue, each awaiting 100
 * sendBatch(100) of ~200 B one after another) and consuming them (one consumer per queue, batches
 * of 100, acked), celld with its cells on the main thread (unthreaded) and with
 * HostOptions.cellThreads, in the same run; a host started afresh for each run. Aggregate messages
 * per second from the first request to the last ack, medians of rounds, and where the CPU went:
 * the host's main thread, its other threads (the cell threads among them), its workerd.
 * Run: npm run bench threads-host   (-- --threads N as for `threads`; CELLD_BENCH_ROUNDS, 3 by default)
 */
import { availableParallelism } from "node:os";
import { loadLine } from "./machine-load.ts";
import { fmt, median, ratioLine } from "../packages/queue-cell/bench/bench-stats.ts";
import type { ThreadsBenchOptions } from "./threads-bench.ts";
import { measureHostRun, type HostRunFigures } from "./threads-host-run.ts";

const rounds = Number(process.env.CELLD_BENCH_ROUNDS ?? 3);
const queueCounts = [1, 2, 4] as const;

function threadCounts(queues: number, cores: number, options: ThreadsBenchOptions): number[] {
  return [0, options.threads ?? Math.min(queues, cores)];
}

const placement = (threads: number): string => (threads === 0 ? "unthreaded" : `cellThreads ${threads}`);

export async function runThreadsHostBench(options: ThreadsBenchOptions = {}, log: (line: string) => void = console.log): Promise<void> {
  const cores = availableParallelism();
  log(
    `threads-host: celld end to end, Workers in workerd producing to and consuming from ${queueCounts.join(", ")} queues at once ` +
      `(per queue one request awaiting 100 sendBatch(100) in turn, one consumer acking batches of 100), cells on the main thread ` +
      `vs on worker threads; a host started afresh for each run; ${rounds} rounds, medians; ${loadLine(cores)}`,
  );
  const runs: HostRunFigures[] = [];
  for (let round = 0; round < rounds; round++) {
    const parts: string[] = [];
    for (const queues of queueCounts) {
      const counts = threadCounts(queues, cores, options);
      for (const threads of round % 2 === 0 ? counts : [...counts].reverse()) {
        const run = await measureHostRun(queues, threads);
        runs.push(run);
        parts.push(`${queues}q ${placement(threads)} ${fmt(run.endToEnd)}`);
      }
    }
    log(`  round ${round + 1} (msg/s end to end): ${parts.join(", ")}`);
  }
  for (const queues of queueCounts) {
    const counts = threadCounts(queues, cores, options);
    const rate = (t: number) => median(runs.filter((r) => r.queues === queues && r.cellThreads === t).map((r) => r.endToEnd));
    for (const t of counts) {
      const mine = runs.filter((r) => r.queues === queues && r.cellThreads === t);
      log(`  ${queues} queue${queues === 1 ? "" : "s"}, ${placement(t)}: ${fmt(rate(t))} msg/s end to end (rounds: ${mine.map((r) => fmt(r.endToEnd)).join(", ")})`);
      log(cpuLine(medianRun(mine)));
    }
    if (counts.length > 1) {
      log(ratioLine(`    ${queues} queue${queues === 1 ? "" : "s"}, ${placement(counts[1]!)} vs unthreaded`, rate(counts[1]!), rate(0), queues === 1 ? "about 1" : "> 1"));
    }
  }
  log(`  ${loadLine(cores)} at the end`);
}

function medianRun(runs: readonly HostRunFigures[]): HostRunFigures {
  return [...runs].sort((a, b) => a.endToEnd - b.endToEnd)[(runs.length - 1) >> 1]!;
}

/** µs per message and share of a core, for the host's main thread, its busiest other threads, the rest, and workerd. */
function cpuLine(run: HostRunFigures): string {
  if (run.cpu === undefined) return "      CPU: no /proc here";
  const messages = run.endToEnd * run.seconds;
  const part = (name: string, ms: number) => `${name} ${Math.round((ms * 1000) / messages)} µs (${Math.round((100 * ms) / (run.seconds * 1000))}% of a core)`;
  const shown = Math.max(run.cellThreads, 1);
  const busiest = run.cpu.otherThreadsMs.slice(0, shown).map((ms, i) => part(`thread #${i + 1}`, ms));
  const rest = run.cpu.otherThreadsMs.slice(shown).reduce((sum, ms) => sum + ms, 0);
  return (
    `      CPU per message acked: host main thread ${part("", run.cpu.mainMs).trim()}; its other threads, busiest first: ${busiest.join(", ")}, ` +
    `${part("the rest", rest)}; workerd ${part("", run.cpu.workerdMs).trim()}`
  );
}
