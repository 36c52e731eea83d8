import { limits } from "@celld/queue-cell";
import { openCellsMaxFor } from "../host/open-files-limit.ts";

/**
 * How celld's open-files limit is shared out, so that no number of client connections can take
 * the descriptors the queues need: the cells (their SQLite files and logs) get their share first
 * (limits.openCellsFileDescriptorShare, as openCellsMaxFor sizes them), then a fixed reserve for
 * celld's own files and the internal sockets (workerd's calls into celld, the front's connections
 * into workerd), and only the rest goes to the two ports' clients. workerd is another process with
 * its own limit; the front in celld holds its connections to workerd to frontUpstreamSocketsMax,
 * which is what keeps a flood on `--port` from reaching workerd's descriptors at all.
 */
export interface DescriptorBudget {
  /** The open-files limit the budget was sized from (an assumed one where it cannot be read). */
  limit: number;
  limitKnown: boolean;
  /** For the cells that stay open, at their peak, within their share of the limit. */
  cells: number;
  /** celld's own files: stdio, the API's key and catalog databases, its lock, Miniflare's, esbuild's. */
  ownFiles: number;
  /** Sockets between workerd and celld, both ways. */
  internalSockets: number;
  /** Client connections open at once on `--port`. */
  workersConnectionsMax: number;
  /** Client connections open at once on `--api-port` (0 without an API). */
  apiConnectionsMax: number;
}

/**
 * What one open cell may hold at its peak: limits.openCellFileDescriptors at rest, up to 9 while
 * its checkpointer has the file open (see limits.ts).
 */
const openCellFileDescriptorsPeak = 9;
/** Assumed where the limit cannot be read (not Linux): the usual default soft limit. */
export const assumedOpenFilesLimit = 1_024;
/** Descriptors celld's own files take whatever the deployment: measured ~40 at rest, doubled. */
export const ownFilesReserve = 96;
/** Sockets the front keeps to workerd, per Worker, at most (more requests wait for one). */
export const frontUpstreamSocketsMax = 256;
/** The Workers port gets this share of what is left for clients when the API listens too. */
const workersClientShare = 2 / 3;

export interface BudgetInput {
  openFilesLimit: number | undefined;
  /** Workers in the deployment (the front keeps sockets to each). */
  workers: number;
  api: boolean;
}

/** Sizes the budget, or throws when the limit is too small for even one client per port. */
export function descriptorBudget(input: BudgetInput): DescriptorBudget {
  const limit = input.openFilesLimit ?? assumedOpenFilesLimit;
  const cells = Math.min(openCellsMaxFor(limit) * openCellFileDescriptorsPeak, Math.floor(limit * limits.openCellsFileDescriptorShare));
  // The front's sockets into workerd, and as many again for workerd's calls into celld (producer
  // sends, queue dispatch), whose concurrency follows the requests'.
  const internalSockets = Math.min(2 * frontUpstreamSocketsMax * Math.max(1, input.workers), Math.floor(limit / 8));
  const clients = limit - cells - ownFilesReserve - internalSockets;
  const workersConnectionsMax = input.api ? Math.floor(clients * workersClientShare) : clients;
  const apiConnectionsMax = input.api ? clients - workersConnectionsMax : 0;
  if (workersConnectionsMax < 1 || (input.api && apiConnectionsMax < 1)) {
    throw new Error(
      `the open-files limit of ${limit} leaves no descriptor for client connections once the queues and celld's own files ` +
        `have theirs; raise it (ulimit -n 4096 before celld, or LimitNOFILE= in its systemd unit)`,
    );
  }
  return { limit, limitKnown: input.openFilesLimit !== undefined, cells, ownFiles: ownFilesReserve, internalSockets, workersConnectionsMax, apiConnectionsMax };
}

/** The start line: where the descriptors go, and the two maxima in force. */
export function budgetLine(budget: DescriptorBudget, maxima: { workers: number; api: number | undefined }): string {
  const known = budget.limitKnown ? "" : " (assumed: it cannot be read here)";
  const api = maxima.api === undefined ? "" : `, --api-port ${maxima.api}`;
  return (
    `descriptors: open-files limit ${budget.limit}${known}; reserved ${budget.cells} for queues, ` +
    `${budget.internalSockets} for workerd's sockets, ${budget.ownFiles} for celld's files; ` +
    `client connections at most --port ${maxima.workers}${api}`
  );
}

/**
 * A maximum given on the command line, checked against what the budget leaves: more would let
 * clients take the queues' descriptors, which is what the budget is for.
 */
export function checkConnectionsMax(flag: string, value: number, budgetMax: number, limit: number): void {
  if (!Number.isInteger(value) || value < 1 || value > budgetMax) {
    throw new Error(
      `${flag} must be a whole number from 1 to ${budgetMax} (what the open-files limit of ${limit} leaves for its clients ` +
        `after the queues' share), got ${value}; raise the limit (ulimit -n) for more`,
    );
  }
}
