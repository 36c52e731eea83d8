/**
 * The ways of holding cells that `npm run bench threads` compares: every cell on the main thread
 * (CellRegistry, celld's default), and cells spread over worker threads (ThreadedCellRegistry).
 */
import { CellRegistry, ThreadedCellRegistry, type QueueCells } from "../packages/queue-cell/src/index.ts";
import { ownerOf } from "../packages/queue-cell/src/threads/owner-hash.ts";
import type { CpuMs } from "./thread-cpu.ts";
import type { LoadedCell } from "./queue-loops.ts";

/** Where the cells run: `threads` 0, on the main thread; n, spread over n worker threads. */
export interface Placement {
  threads: number;
}

export interface BenchRegistry {
  open(name: string): Promise<LoadedCell>;
  /** Each cell thread's CPU so far, in thread order; [] when the cells run on the main thread. */
  cellThreadCpu(): Promise<Array<CpuMs | undefined>>;
  closeAll(): Promise<void>;
}

export function placementName(p: Placement): string {
  return p.threads === 0 ? "unthreaded" : `${p.threads} thread${p.threads === 1 ? "" : "s"}`;
}

/** The thread each of `names` runs on with `threads` cell threads (the registry's own hash). */
export function threadsOf(names: readonly string[], threads: number): number[] {
  return names.map((name) => ownerOf(name, threads));
}

/** A registry on `dataDir` holding its cells as `placement` says, with the default durability ("full"). */
export function openRegistry(placement: Placement, dataDir: string): BenchRegistry {
  if (placement.threads === 0) {
    const cells: QueueCells = new CellRegistry({ dataDir });
    return { open: (name) => cells.open(name), cellThreadCpu: async () => [], closeAll: () => cells.closeAll() };
  }
  const cells = new ThreadedCellRegistry({ dataDir, threads: placement.threads });
  return {
    open: (name) => cells.open(name),
    cellThreadCpu: async () => {
      const listed = await cells.threadCpu();
      // Nothing listed: no /proc/thread-self here. A thread missing from a list is one no cell has
      // started yet (more threads than queues): it has used nothing.
      if (listed.length === 0) return Array.from({ length: placement.threads }, () => undefined);
      const byThread = new Map(listed.map((t) => [t.thread, { userMs: t.userMs, systemMs: t.systemMs }]));
      return Array.from({ length: placement.threads }, (_, i) => byThread.get(i) ?? { userMs: 0, systemMs: 0 });
    },
    closeAll: () => cells.closeAll(),
  };
}
