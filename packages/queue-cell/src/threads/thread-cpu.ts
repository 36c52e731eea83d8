import { readFileSync } from "node:fs";

/** CPU time one thread has used since it started, ms. */
export interface ThreadCpuTimes {
  userMs: number;
  systemMs: number;
}

/** One cell thread's CPU time (ThreadedCellRegistry.threadCpu). */
export interface ThreadCpu extends ThreadCpuTimes {
  /** The thread's index, 0 to threads - 1. */
  thread: number;
}

/**
 * Linux's clock tick (sysconf(_SC_CLK_TCK)), the unit of utime and stime: 100 on every Linux
 * architecture Node supports, and Node offers no way to ask.
 */
const msPerClockTick = 10;

/**
 * The calling thread's CPU time, from /proc/thread-self/stat (utime and stime, fields 14 and 15);
 * undefined on a system without it (not Linux, or /proc not mounted). process.cpuUsage() would
 * count every thread of the process.
 */
export function readThreadCpu(): ThreadCpuTimes | undefined {
  let stat: string;
  try {
    stat = readFileSync("/proc/thread-self/stat", "utf8");
  } catch {
    return undefined;
  }
  // The second field, the thread's name in parentheses, may hold spaces and parentheses itself.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[0] is field 3 (state): utime is field 14, stime field 15.
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
  return { userMs: utime * msPerClockTick, systemMs: stime * msPerClockTick };
}
