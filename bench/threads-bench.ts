/**
 * Cells on worker threads (issue 34, "More than one core"): aggregate throughput over 1, 2 and 4
 * queues with every cell on the main thread and with the cells spread over worker threads, in the
 * same run. Each queue has its own producer (awaiting each sendBatch of 100 messages of 200 B) and
 * consumer (lease up to 100 with a short wait, ack) on the main thread, through the cell surface
 * the host uses (no HTTP, no workerd), for a warm-up and then a measured window; several rounds,
 * medians, the placements alternating which goes first. Beside each rate: the CPU of each thread
 * (the main thread's from /proc/thread-self/stat, each cell thread's from the registry) per
 * message, and how busy each was. Then what a larger machine should show, from this run's figures.
 * Each queue count runs twice: sequential (one producer and one consumer a queue, each awaiting its
 * call, where a call's round trip holds the rate) and with several calls in flight (N producers and
 * N consumers a queue, where the unthreaded main thread becomes the limit), printed side by side.
 * Run: npm run bench threads   (-- --threads N: that many cell threads for every queue count,
 * instead of min(queues, cores); -- --in-flight N: producers and consumers a queue in the second
 * mode, 4 by default; CELLD_BENCH_ROUNDS, 3 by default; CELLD_BENCH_SECONDS, the window, 3 by default)
 */
import { availableParallelism } from "node:os";
import { limits } from "../packages/queue-cell/src/index.ts";
import { loadLine } from "./machine-load.ts";
import { placementName, threadsOf, type Placement } from "./thread-registries.ts";
import { growthLines, machineLine, queueCountLines } from "./threads-report.ts";
import { outlookLines } from "./threads-outlook.ts";
import { measureRun, queueNames, type RunFigures, type RunTiming } from "./threads-run.ts";
import { batchMessages, bodyBytes } from "./queue-loops.ts";

const rounds = Number(process.env.CELLD_BENCH_ROUNDS ?? 3);
const timing: RunTiming = { warmUpMs: 1_000, windowMs: Number(process.env.CELLD_BENCH_SECONDS ?? 3) * 1000 };
const queueCounts = [1, 2, 4] as const;

/** The second mode's producers and consumers a queue, unless --in-flight says. */
export const defaultInFlight = 4;
/** The most --in-flight takes: enough to fill a main thread many times over. */
export const inFlightMax = 256;

export interface ThreadsBenchOptions {
  /** Cell threads for every queue count; unset: min(queues, cores). */
  threads?: number;
  /** Producers and consumers a queue in the in-flight mode; unset: defaultInFlight. */
  inFlight?: number;
}

/** `--threads N` and `--in-flight N` from the bench's own arguments; a clear error naming the flag otherwise. */
export function threadsBenchOptions(args: readonly string[]): ThreadsBenchOptions {
  const threads = wholeFlag(args, "--threads", limits.cellThreadsMax);
  const inFlight = wholeFlag(args, "--in-flight", inFlightMax);
  return { ...(threads === undefined ? {} : { threads }), ...(inFlight === undefined ? {} : { inFlight }) };
}

function wholeFlag(args: readonly string[], flag: string, max: number): number | undefined {
  const at = args.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
  if (at === -1) return undefined;
  const text = args[at]!.includes("=") ? args[at]!.slice(flag.length + 1) : args[at + 1];
  const value = Number(text);
  if (text === undefined || text.trim() === "" || !Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`${flag} must be a whole number from 1 to ${max}, got ${JSON.stringify(text ?? null)}`);
  }
  return value;
}

function placementsFor(queues: number, cores: number, options: ThreadsBenchOptions): Placement[] {
  return [{ threads: 0 }, { threads: options.threads ?? Math.min(queues, cores) }];
}

/** Which thread each queue of each threaded run falls on. */
function placementLine(cores: number, options: ThreadsBenchOptions): string {
  return queueCounts
    .map((queues) => {
      const threads = placementsFor(queues, cores, options).find((p) => p.threads > 0)!.threads;
      return `${queues} queue${queues === 1 ? "" : "s"} on ${threads}: ${threadsOf(queueNames(queues), threads).join(", ")}`;
    })
    .join("; ");
}

export async function runThreadsBench(options: ThreadsBenchOptions = {}, log: (line: string) => void = console.log): Promise<void> {
  const cores = availableParallelism();
  const inFlight = options.inFlight ?? defaultInFlight;
  const modes = [1, inFlight];
  log(
    `threads: aggregate throughput over ${queueCounts.join(", ")} queues, cells on the main thread (unthreaded) vs on worker threads ` +
      `(${options.threads === undefined ? "min(queues, cores)" : options.threads} threads); per queue, sequential: one producer awaiting each ` +
      `sendBatch(${batchMessages} x ${bodyBytes} B) and one consumer (lease ${batchMessages}, ack); in flight: ${inFlight} of each; on the main ` +
      `thread; durability "full"; ${timing.warmUpMs / 1000} s warm-up, ${timing.windowMs / 1000} s measured, ${rounds} rounds, medians; ${loadLine(cores)}`,
  );
  log(`  queues on cell threads (the registry's hash of their names): ${placementLine(cores, options)}`);
  const runs: RunFigures[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const mode of modes) {
      const parts: string[] = [];
      for (const queues of queueCounts) {
        const placements = placementsFor(queues, cores, options);
        // Alternating who goes first spreads the machine's drift over both.
        for (const p of round % 2 === 0 ? placements : [...placements].reverse()) {
          const run = await measureRun(p, queues, timing, mode);
          runs.push(run);
          parts.push(`${queues}q ${placementName(p)} ${Math.round(run.ackedPerSecond).toLocaleString("en-US")}`);
        }
      }
      log(`  round ${round + 1}, ${modeName(mode)} (msg/s acked): ${parts.join(", ")}`);
    }
  }
  for (const mode of modes) {
    const mine = runs.filter((r) => r.inFlight === mode);
    log(`  ${modeName(mode)}:`);
    for (const queues of queueCounts) for (const line of queueCountLines(queues, placementsFor(queues, cores, options), mine)) log(line);
    for (const line of growthLines(queueCounts, mine)) log(line);
  }
  const machine = machineLine(runs, cores);
  if (machine !== undefined) log(machine);
  log(`  ${loadLine(cores)} at the end`);
  for (const line of outlookLines(runs, cores)) log(line);
}

function modeName(inFlight: number): string {
  return inFlight === 1 ? "sequential (1 producer, 1 consumer a queue)" : `in flight (${inFlight} producers, ${inFlight} consumers a queue)`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await runThreadsBench(threadsBenchOptions(process.argv.slice(2)));
}
