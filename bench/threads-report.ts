/**
 * The lines `npm run bench threads` prints from its runs: per queue count and placement, the
 * median aggregate rate and, from the run with that rate, where the CPU went by thread; then the
 * threaded / unthreaded ratio and how the aggregate grows with queues.
 */
import { fmt, median, ratioLine } from "../packages/queue-cell/bench/bench-stats.ts";
import { totalMs, type CpuMs } from "./thread-cpu.ts";
import { placementName, type Placement } from "./thread-registries.ts";
import type { RunFigures } from "./threads-run.ts";

/** The run with the median acked rate, whole, so that its CPU figures belong to the rate printed. */
export function medianRun(runs: readonly RunFigures[]): RunFigures {
  const sorted = [...runs].sort((a, b) => a.ackedPerSecond - b.ackedPerSecond);
  return sorted[(sorted.length - 1) >> 1]!;
}

const us = (n: number): string => `${Math.round(n).toLocaleString("en-US")} µs`;
const pct = (n: number): string => `${Math.round(n)}%`;

/** CPU of one thread: µs per message acked and how busy it was, % of one core. */
function threadPart(name: string, cpu: CpuMs | undefined, run: RunFigures, acked: number): string {
  if (cpu === undefined) return `${name} (no /proc here)`;
  return `${name} ${us((totalMs(cpu) * 1000) / acked)} (${pct((100 * totalMs(cpu)) / (run.seconds * 1000))} of a core)`;
}

/** Where a run's CPU went, per message acked: main, each cell thread, the rest of the process. */
export function cpuLine(run: RunFigures): string {
  const acked = run.ackedPerSecond * run.seconds;
  const parts = [threadPart("main", run.main, run, acked)];
  run.cellThreads.forEach((cpu, i) => parts.push(threadPart(`cell thread ${i}`, cpu, run, acked)));
  const known = [run.main, ...run.cellThreads];
  if (known.every((c) => c !== undefined)) {
    const rest = totalMs(run.process) - known.reduce((sum, c) => sum + totalMs(c!), 0);
    parts.push(`${threadPart("other threads", { userMs: rest, systemMs: 0 }, run, acked)}`);
  }
  return `      CPU per message acked: ${us((totalMs(run.process) * 1000) / acked)} in all; ${parts.join(", ")}`;
}

/** One queue count: each placement's median, its CPU, and the ratio of the threaded to the unthreaded. */
export function queueCountLines(queues: number, placements: readonly Placement[], runs: readonly RunFigures[]): string[] {
  const lines: string[] = [];
  const of = (p: Placement) => runs.filter((r) => r.queues === queues && r.placement.threads === p.threads);
  for (const p of placements) {
    const mine = of(p);
    const mid = medianRun(mine);
    lines.push(
      `  ${queues} queue${queues === 1 ? "" : "s"}, ${placementName(p)}: ${fmt(median(mine.map((r) => r.ackedPerSecond)))} msg/s acked, ` +
        `${fmt(median(mine.map((r) => r.sentPerSecond)))} msg/s sent (medians of ${mine.length}; rounds: ${mine.map((r) => fmt(r.ackedPerSecond)).join(", ")})`,
    );
    lines.push(cpuLine(mid));
  }
  const [unthreaded, threaded] = [placements.find((p) => p.threads === 0), placements.find((p) => p.threads !== 0)];
  if (unthreaded !== undefined && threaded !== undefined) {
    lines.push(
      ratioLine(
        `    ${queues} queue${queues === 1 ? "" : "s"}, aggregate acked, ${placementName(threaded)} vs unthreaded`,
        median(of(threaded).map((r) => r.ackedPerSecond)),
        median(of(unthreaded).map((r) => r.ackedPerSecond)),
        queues === 1 ? "about 1: no harm on one queue" : "> 1 once a second core is free",
      ),
    );
  }
  return lines;
}

/** How the aggregate grows from the fewest queues to more, unthreaded and threaded (whatever the thread count). */
export function growthLines(queueCounts: readonly number[], runs: readonly RunFigures[]): string[] {
  const kinds = [
    ["unthreaded", (r: RunFigures) => r.placement.threads === 0],
    ["threaded", (r: RunFigures) => r.placement.threads > 0],
  ] as const;
  return kinds.flatMap(([name, isKind]) => {
    const rate = (q: number) => median(runs.filter((r) => r.queues === q && isKind(r)).map((r) => r.ackedPerSecond));
    if (!runs.some(isKind)) return [];
    const base = rate(queueCounts[0]!);
    const steps = queueCounts.slice(1).map((q) => `${q} queues ${(rate(q) / base).toFixed(2)}×`);
    return [`  aggregate against ${queueCounts[0]} queue, ${name}: ${steps.join(", ")}`];
  });
}

/** What else ran on the machine during the runs (the median run's), as a share of its cores. */
export function machineLine(runs: readonly RunFigures[], cores: number): string | undefined {
  const seen = runs.flatMap((r) => (r.machine === undefined ? [] : [{ r, m: r.machine }]));
  if (seen.length === 0) return undefined;
  const shares = seen.map(({ r, m }) => m.othersMs / (r.seconds * 1000)).sort((a, b) => a - b);
  const steal = seen.map(({ r, m }) => m.stealMs / (r.seconds * 1000)).sort((a, b) => a - b);
  return (
    `  the machine's other work during the windows (processes outside this one, kernel threads included): median ` +
    `${pct(100 * median(shares))} of one core (least ${pct(100 * shares[0]!)}, most ${pct(100 * shares.at(-1)!)}) ` +
    `of the ${cores} cores; hypervisor steal median ${pct(100 * median(steal))} of one core`
  );
}
