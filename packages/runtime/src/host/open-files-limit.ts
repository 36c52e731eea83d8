import { readFileSync } from "node:fs";
import { limits } from "@celld/queue-cell";

/**
 * The soft "Max open files" of a /proc/<pid>/limits text; undefined when it is unlimited or the
 * line is missing.
 */
export function openFilesSoftLimit(limitsText: string): number | undefined {
  const match = /^Max open files\s+(\S+)/m.exec(limitsText);
  const soft = match?.[1];
  return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : undefined;
}

/**
 * This process's soft RLIMIT_NOFILE, where it can be read (Linux); undefined elsewhere. Node raises
 * its soft limit to the hard one as it starts, so this is the hard limit celld was started with.
 */
export function readOpenFilesLimit(): number | undefined {
  if (process.platform !== "linux") return undefined;
  try {
    return openFilesSoftLimit(readFileSync("/proc/self/limits", "utf8"));
  } catch {
    return undefined;
  }
}

/**
 * How many cells may stay open under an open-files limit: limits.openCellsMax, or fewer so that
 * open cells take at most their share of the limit (at least one, whatever the limit).
 */
export function openCellsMaxFor(openFilesLimit: number | undefined): number {
  if (openFilesLimit === undefined) return limits.openCellsMax;
  const fitting = Math.floor((openFilesLimit * limits.openCellsFileDescriptorShare) / limits.openCellFileDescriptors);
  return Math.max(1, Math.min(limits.openCellsMax, fitting));
}

/** The line that says the bound was lowered, what it is, and how to raise it. */
export function openCellsLoweredMessage(openFilesLimit: number, openCellsMax: number): string {
  return (
    `the open-files limit is ${openFilesLimit}, so at most ${openCellsMax} queues stay open at once, not ${limits.openCellsMax} ` +
    `(each holds about ${limits.openCellFileDescriptors} descriptors; idle ones close and reopen on use); to keep more open, ` +
    `raise the limit: ulimit -n before celld, or LimitNOFILE= in its systemd unit`
  );
}

/**
 * The warning for a deployment with more consumed queues than the bound: a queue with a consumer
 * is never closed, so the bound cannot hold them, and at about 6 descriptors each (more while
 * written) plus a socket per call in flight, such a host ran out of descriptors (120 consumed
 * queues at 1,024: sends failed as "Network connection lost").
 */
export function consumedPastOpenCellsMessage(openFilesLimit: number, openCellsMax: number, consumed: number): string {
  return (
    `${consumed} queues have consumers, which keep them open, but the open-files limit of ${openFilesLimit} leaves room ` +
    `for ${openCellsMax}: celld may run out of descriptors, and sends then fail; raise the limit to at least ` +
    `${Math.ceil((consumed * limits.openCellFileDescriptors) / limits.openCellsFileDescriptorShare)}: ulimit -n before celld, ` +
    `or LimitNOFILE= in its systemd unit`
  );
}
