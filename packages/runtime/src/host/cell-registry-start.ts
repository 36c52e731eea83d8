import { CellRegistry, limits, type Clock, type QueueCells } from "@celld/queue-cell";
import type { Deployment } from "../config/index.ts";
import { dataDirUnusable } from "./data-dir-lock.ts";
import { logCellBackgroundError, type HostLog } from "./host-log.ts";
import type { HostOptions } from "./host-options.ts";
import { consumedPastOpenCellsMessage, openCellsLoweredMessage, openCellsMaxFor, readOpenFilesLimit } from "./open-files-limit.ts";

/**
 * The cells' registry of a starting host, its open cells bounded by the open-files limit (said
 * when it lowers the bound, warned of when the consumers alone need more cells than that).
 */
export function openCellRegistry(options: HostOptions, deployment: Deployment, clock: Clock, log: HostLog): QueueCells {
  const openFilesLimit = options.openFilesLimit ?? readOpenFilesLimit();
  const openCellsMax = openCellsMaxFor(openFilesLimit);
  if (openFilesLimit !== undefined && openCellsMax < limits.openCellsMax) log.info(openCellsLoweredMessage(openFilesLimit, openCellsMax));
  const consumed = deployment.workers.reduce((n, worker) => n + worker.consumers.length, 0);
  if (openFilesLimit !== undefined && consumed > openCellsMax) log.warn(consumedPastOpenCellsMessage(openFilesLimit, openCellsMax, consumed));
  try {
    return new CellRegistry({
      openCellsMax,
      dataDir: options.dataDir,
      clock,
      durability: options.durability ?? "full",
      idleCloseMs: options.cellIdleCloseMs,
      onBackgroundError: (error) => logCellBackgroundError(log, error),
      onWarning: (message) => log.warn(message),
      ...(options.metrics === undefined ? {} : { observe: options.metrics.observerFor, syncFile: options.metrics.syncFile }),
    });
  } catch (error) {
    throw dataDirUnusable(options.dataDir, "creating its cells directory", error);
  }
}
