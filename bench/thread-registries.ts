/**
 * The ways of holding cells that `npm run bench threads` compares: every cell on the main thread
 * (CellRegistry, celld's default), and cells spread over worker threads.
 */
import { CellRegistry } from "../packages/queue-cell/src/index.ts";
import type { CpuMs } from "./thread-cpu.ts";
import type { LoadedCell } from "./queue-loops.ts";

/** Where the cells run: `threads` 0, on the main thread; n, spread over n worker threads. */
export interface Placement {
  threads: number;
}

/** Whether this branch has the threaded registry yet (ThreadedCellRegistry, issue 34). */
export const threadsAvailable = false;

/** Whether this branch's host takes HostOptions.cellThreads yet (issue 34). */
export const hostThreadsAvailable = false;

export interface BenchRegistry {
  open(name: string): Promise<LoadedCell>;
  /** Each cell thread's CPU so far, in thread order; [] when the cells run on the main thread. */
  cellThreadCpu(): Promise<Array<CpuMs | undefined>>;
  closeAll(): Promise<void>;
}

export function placementName(p: Placement): string {
  return p.threads === 0 ? "unthreaded" : `${p.threads} thread${p.threads === 1 ? "" : "s"}`;
}

/** A registry on `dataDir` holding its cells as `placement` says, with the default durability ("full"). */
export function openRegistry(placement: Placement, dataDir: string): BenchRegistry {
  if (placement.threads !== 0) throw new Error("cells on worker threads are not on this branch yet");
  const cells = new CellRegistry({ dataDir });
  return {
    open: (name) => cells.open(name),
    cellThreadCpu: async () => [],
    closeAll: () => cells.closeAll(),
  };
}
