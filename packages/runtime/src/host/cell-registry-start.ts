import { availableParallelism } from "node:os";
import { CellRegistry, ThreadedCellRegistry, limits, systemClock, type Clock, type QueueCells } from "@celld/queue-cell";
import type { Deployment } from "../config/index.ts";
import { dataDirUnusable } from "./data-dir-lock.ts";
import { logCellBackgroundError, type HostLog } from "./host-log.ts";
import type { HostOptions } from "./host-options.ts";
import { consumedPastOpenCellsMessage, openCellsLoweredMessage, openCellsMaxFor, readOpenFilesLimit } from "./open-files-limit.ts";

/**
 * The cells' registry of a starting host, its open cells bounded by the open-files limit (said
 * when it lowers the bound, warned of when the consumers alone need more cells than that). With
 * `cellThreads`, the cells run on that many worker threads (ThreadedCellRegistry).
 */
export function openCellRegistry(options: HostOptions, deployment: Deployment, clock: Clock, log: HostLog): QueueCells {
  const openFilesLimit = options.openFilesLimit ?? readOpenFilesLimit();
  const openCellsMax = openCellsMaxFor(openFilesLimit);
  if (openFilesLimit !== undefined && openCellsMax < limits.openCellsMax) log.info(openCellsLoweredMessage(openFilesLimit, openCellsMax));
  const consumed = deployment.workers.reduce((n, worker) => n + worker.consumers.length, 0);
  if (openFilesLimit !== undefined && consumed > openCellsMax) log.warn(consumedPastOpenCellsMessage(openFilesLimit, openCellsMax, consumed));
  const threads = options.cellThreads ?? 0;
  checkCellThreadsClock(threads, clock);
  const common = {
    openCellsMax,
    dataDir: options.dataDir,
    durability: options.durability ?? "full",
    idleCloseMs: options.cellIdleCloseMs,
    onBackgroundError: (error: unknown) => logCellBackgroundError(log, error),
    onWarning: (message: string) => log.warn(message),
  };
  const { metrics } = options;
  try {
    if (threads === 0) {
      return new CellRegistry({ ...common, clock, ...(metrics === undefined ? {} : { observe: metrics.observerFor, syncFile: metrics.syncFile }) });
    }
    const registry = new ThreadedCellRegistry({
      ...common,
      threads,
      ...(metrics === undefined ? {} : { observe: metrics.observerFor, onFileSynced: metrics.fileSynced }),
    });
    const cores = availableParallelism();
    log.info(`the queues' cells run on ${threads} worker thread${threads === 1 ? "" : "s"} (--cell-threads), each queue on one of them`);
    if (threads > cores) log.warn(cellThreadsPastCoresMessage(threads, cores));
    return registry;
  } catch (error) {
    // A thread count out of its bound is the caller's mistake, not the directory's.
    if (error instanceof RangeError || error instanceof TypeError) throw error;
    throw dataDirUnusable(options.dataDir, "creating its cells directory", error);
  }
}

/**
 * Cell threads run on the system clock: a test's fake clock cannot cross threads, and a host whose
 * consumers ran on one clock and its cells on another would time batches against the wrong one.
 * Refused before anything starts.
 */
export function checkCellThreadsClock(threads: number, clock: Clock | undefined): void {
  if (threads > 0 && clock !== undefined && clock !== systemClock) {
    throw new TypeError(
      `HostOptions.cellThreads (${threads}) needs the system clock, but a clock was given: a clock object cannot cross ` +
        "to the cells' threads; leave cellThreads at 0 to run the cells on a test's clock",
    );
  }
}

/** More threads than cores buy nothing: the threads take turns on the cores, and each costs memory. */
export function cellThreadsPastCoresMessage(threads: number, cores: number): string {
  return (
    `--cell-threads ${threads} is more than this machine's ${cores} core${cores === 1 ? "" : "s"}: the threads take turns, ` +
    `and each costs about 10 MB; ${Math.max(1, cores - 1)} or fewer leaves a core for workerd and HTTP (docs/operating.md#cell-threads---cell-threads)`
  );
}
