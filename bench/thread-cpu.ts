/**
 * CPU time by thread, for `npm run bench threads`: the calling thread's own
 * (/proc/thread-self/stat, read on the thread it describes), another process's threads
 * (/proc/PID/task), and this whole process's (getrusage),
 * so that what neither the main thread nor the cell threads used (libuv's pool running the
 * fdatasyncs, the WAL checkpointers, V8's GC helpers) shows as the rest. Linux only for the
 * per-thread figure; elsewhere it is undefined and the bench says so.
 */
import { readdirSync, readFileSync } from "node:fs";

/** CPU used so far, ms. */
export interface CpuMs {
  userMs: number;
  systemMs: number;
}

// USER_HZ, in which /proc reports times, is 100 on every Linux architecture Node runs on.
const msPerTick = 10;

/** The calling thread's CPU so far (so: the main thread's, called on it); undefined without /proc. */
export function ownThreadCpu(): CpuMs | undefined {
  return statCpu("/proc/thread-self/stat");
}

/**
 * Each thread of process `pid` (another one: a bench host), by thread id, so far; the main
 * thread's id is the pid. Undefined without /proc or once the process has gone.
 */
export function threadsCpu(pid: number): Map<number, CpuMs> | undefined {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  const threads = new Map<number, CpuMs>();
  for (const tid of tids) {
    // undefined: the thread ended between listing and reading
    const cpu = statCpu(`/proc/${pid}/task/${tid}/stat`);
    if (cpu !== undefined) threads.set(Number(tid), cpu);
  }
  return threads;
}

function statCpu(path: string): CpuMs | undefined {
  let stat: string;
  try {
    stat = readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
  // The name (field 2) is in parentheses and may hold spaces or ")": fields count from the last ")".
  // After it: state (3) ... utime (14), stime (15).
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { userMs: Number(fields[11]) * msPerTick, systemMs: Number(fields[12]) * msPerTick };
}

/** Every thread of this process together, so far. */
export function processCpu(): CpuMs {
  const { user, system } = process.cpuUsage();
  return { userMs: user / 1000, systemMs: system / 1000 };
}

export const totalMs = (cpu: CpuMs): number => cpu.userMs + cpu.systemMs;

export function cpuSince(before: CpuMs, after: CpuMs): CpuMs {
  return { userMs: after.userMs - before.userMs, systemMs: after.systemMs - before.systemMs };
}
