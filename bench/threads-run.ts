/**
 * One measured run of `npm run bench threads`: `queues` queues on a fresh data directory, held as
 * `placement` says, each loaded by its own producer and consumer (queue-loops.ts) for a warm-up
 * and then for the measured window, whose figures are the differences between a snapshot at its
 * start and one at its end: messages sent and acked, CPU by thread, the machine's other work.
 */
import { setMaxListeners } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { loadQueue, type QueueTally } from "./queue-loops.ts";
import { machineCpuSnapshot, otherWork, type OtherWork } from "./machine-cpu.ts";
import { cpuSince, ownThreadCpu, processCpu, type CpuMs } from "./thread-cpu.ts";
import { openRegistry, type BenchRegistry, type Placement } from "./thread-registries.ts";

export interface RunFigures {
  queues: number;
  /** Producer loops and consumer loops per queue, each with one call in flight. */
  inFlight: number;
  placement: Placement;
  seconds: number;
  sentPerSecond: number;
  ackedPerSecond: number;
  /** CPU in the window: the main thread (undefined without /proc). */
  main: CpuMs | undefined;
  /** Each cell thread's, in thread order; [] unthreaded. */
  cellThreads: Array<CpuMs | undefined>;
  /** The whole process's. */
  process: CpuMs;
  /** What the rest of the machine ran in the window; undefined without /proc. */
  machine: OtherWork | undefined;
}

/** The names of a run's queues (on 2 threads, the registry's hash puts them on threads 0, 1, 0, 1). */
export function queueNames(queues: number): string[] {
  return Array.from({ length: queues }, (_, i) => `bench-${i}`);
}

export interface RunTiming {
  warmUpMs: number;
  windowMs: number;
}

interface Snapshot {
  at: number;
  sent: number;
  acked: number;
  main: CpuMs | undefined;
  cellThreads: Array<CpuMs | undefined>;
  process: CpuMs;
  machine: ReturnType<typeof machineCpuSnapshot>;
}

export async function measureRun(placement: Placement, queues: number, timing: RunTiming, inFlight = 1): Promise<RunFigures> {
  const dataDir = mkdtempSync(join(tmpdir(), "celld-threads-bench-"));
  const registry = openRegistry(placement, dataDir);
  const stop = new AbortController();
  // Every waiting lease listens on it: more than Node's default 10 with several in flight.
  setMaxListeners(0, stop.signal);
  try {
    const cells = await Promise.all(queueNames(queues).map((name) => registry.open(name)));
    const loads = cells.map((cell) => loadQueue(cell, stop.signal, inFlight));
    const tallies = loads.map((l) => l.tally);
    // A call that fails ends the run at once rather than after the window.
    const failed = Promise.all(loads.map((l) => l.done)).then(() => new Promise<never>(() => {}));
    await Promise.race([sleep(timing.warmUpMs), failed]);
    const start = await snapshot(registry, tallies);
    await Promise.race([sleep(timing.windowMs), failed]);
    const end = await snapshot(registry, tallies);
    stop.abort();
    await Promise.all(loads.map((l) => l.done));
    return figuresOf(placement, queues, inFlight, start, end);
  } finally {
    stop.abort();
    await registry.closeAll();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function snapshot(registry: BenchRegistry, tallies: readonly QueueTally[]): Promise<Snapshot> {
  // The cell threads answer over a message port: asked first, so the main thread's own figures
  // and the tallies are read together just after.
  const cellThreads = await registry.cellThreadCpu();
  return {
    at: performance.now(),
    sent: tallies.reduce((sum, t) => sum + t.sent, 0),
    acked: tallies.reduce((sum, t) => sum + t.acked, 0),
    main: ownThreadCpu(),
    cellThreads,
    process: processCpu(),
    machine: machineCpuSnapshot(),
  };
}

function figuresOf(placement: Placement, queues: number, inFlight: number, start: Snapshot, end: Snapshot): RunFigures {
  const seconds = (end.at - start.at) / 1000;
  return {
    queues,
    inFlight,
    placement,
    seconds,
    sentPerSecond: (end.sent - start.sent) / seconds,
    ackedPerSecond: (end.acked - start.acked) / seconds,
    main: start.main && end.main && cpuSince(start.main, end.main),
    cellThreads: end.cellThreads.map((after, i) => {
      const before = start.cellThreads[i];
      return before && after && cpuSince(before, after);
    }),
    process: cpuSince(start.process, end.process),
    machine: start.machine && end.machine && otherWork(start.machine, end.machine, [process.pid]),
  };
}
