import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * workerd is Miniflare's child process, and nothing stops it when celld's process is killed
 * outright (`kill -9`, the out-of-memory killer). Left running, it holds the host's port, keeps
 * serving its Workers, and, once the next host on the data directory has opened its sockets
 * again, its producer bindings send into that host's queues. Two guards, on Linux (they read
 * /proc; elsewhere there is neither):
 *
 * - a watchdog (a shell loop, apart from celld's process group) that kills workerd within about
 *   a second of celld's process going;
 * - a record of workerd's pid in the data directory, which the next host reads once it holds the
 *   directory's lock and acts on before it checks its port. The lock says no live celld runs on
 *   this directory, but the record may have come with a copy of it (a backup taken with cp -a
 *   while celld ran, started elsewhere to check it): it names the celld that started workerd
 *   too, and a workerd whose celld still lives is that celld's, not left over.
 *
 * A process is known by its pid and its start time together, so a pid the system has since given
 * to another process is never killed.
 */

export interface ProcessInfo {
  pid: number;
  name: string;
  /** One letter: R running, S sleeping, Z a zombie (ended, not yet reaped), and so on. */
  state: string;
  parent: number;
  /** CPU time used so far, user and system, in clock ticks (USER_HZ, 100 a second). */
  cpuTicks: number;
  /** Clock ticks after boot when it started: with the pid, names one process for good. */
  startTicks: string;
}

const recordName = "workerd.pid";

/**
 * One workerd in the record, and the celld that started it. Records written before `host` was
 * added lack it; their workerd counts as left over whenever it runs.
 */
interface RecordedWorkerd {
  pid: number;
  startTicks: string;
  host?: number;
  hostStartTicks?: string;
}

/** The process `pid` as /proc/<pid>/stat describes it; undefined if there is none (or no /proc). */
export function readProcess(pid: number): ProcessInfo | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The name may hold spaces and parentheses; the fields after it start past the last ")".
  const close = stat.lastIndexOf(")");
  const fields = stat.slice(close + 2).split(" ");
  // After the name: state, ppid, ..., utime and stime (fields 14-15 of stat, the 12th-13th
  // here), ..., starttime (field 22, the 20th here).
  return {
    pid,
    name: stat.slice(stat.indexOf("(") + 1, close),
    state: fields[0] ?? "",
    parent: Number(fields[1]),
    cpuTicks: Number(fields[11]) + Number(fields[12]),
    startTicks: fields[19] ?? "",
  };
}

/** The processes whose parent is `pid` (none where there is no /proc). */
export function childProcesses(pid: number): ProcessInfo[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return [];
    const info = readProcess(Number(entry));
    return info !== undefined && info.parent === pid ? [info] : [];
  });
}

/** This process's workerd children. */
export function workerdChildren(): ProcessInfo[] {
  return childProcesses(process.pid).filter((p) => p.name.startsWith("workerd"));
}

/** Watches the workerd a host started; stop() once that workerd has been stopped. */
export class WorkerdGuard {
  private constructor(
    private readonly recordPath: string,
    private readonly watchdog: ChildProcess | undefined,
  ) {}

  /**
   * Records in `dataDir` this process's workerd children that `before` (taken before Miniflare
   * started) does not list, and starts their watchdog. Other hosts in this process keep theirs.
   */
  static start(dataDir: string, before: readonly ProcessInfo[]): WorkerdGuard {
    const recordPath = join(dataDir, recordName);
    const known = new Set(before.map((p) => `${p.pid}@${p.startTicks}`));
    const workerd = workerdChildren().filter((p) => !known.has(`${p.pid}@${p.startTicks}`));
    if (workerd.length === 0) return new WorkerdGuard(recordPath, undefined);
    const hostStartTicks = readProcess(process.pid)?.startTicks;
    const record: RecordedWorkerd[] = workerd.map(({ pid, startTicks }) => ({ pid, startTicks, host: process.pid, hostStartTicks }));
    writeFileSync(recordPath, `${JSON.stringify(record)}\n`);
    const pairs = workerd.flatMap((p) => [String(p.pid), p.startTicks]);
    // detached: its own process group, so that a signal to celld's group (a terminal's Ctrl-C,
    // a `kill -9 -<pgid>`) does not end the watchdog along with the process it watches.
    const watchdog = spawn("/bin/sh", ["-c", watchdogScript, "celld-workerd-watchdog", String(process.pid), ...pairs], {
      detached: true,
      stdio: "ignore",
    });
    watchdog.on("error", () => {}); // no /bin/sh: the record alone guards
    watchdog.unref();
    return new WorkerdGuard(recordPath, watchdog);
  }

  /** celld stopped its workerd itself: the watchdog and the record have nothing left to guard. */
  stop(): void {
    this.watchdog?.kill("SIGKILL");
    rmSync(this.recordPath, { force: true });
  }
}

// $1: celld's pid; then pid and start time of each workerd. Polls once a second: a loop of `kill
// -0` and `sleep` costs nothing to speak of, and a second is short beside a restart.
const watchdogScript = `
host=$1; shift
while kill -0 "$host" 2>/dev/null; do sleep 1; done
while [ $# -ge 2 ]; do
  started=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20)
  [ -n "$started" ] && [ "$started" = "$2" ] && kill -9 "$1" 2>/dev/null
  shift 2
done
`;

/**
 * Kills any workerd a host on `dataDir` left running when it died, and waits until each is gone
 * (its port is free then). Call only while holding the data directory's lock. Returns their pids.
 */
export async function stopLeftoverWorkerd(dataDir: string, timeoutMs = 5_000): Promise<number[]> {
  const recordPath = join(dataDir, recordName);
  if (!existsSync(recordPath)) return [];
  let recorded: RecordedWorkerd[];
  try {
    recorded = JSON.parse(readFileSync(recordPath, "utf8")) as typeof recorded;
  } catch {
    recorded = []; // cut short by the crash it records: nothing to go on
  }
  const isLeftover = (r: RecordedWorkerd): boolean => {
    const now = readProcess(r.pid);
    return now !== undefined && now.startTicks === r.startTicks && now.name.startsWith("workerd");
  };
  const hostAlive = (r: RecordedWorkerd): boolean =>
    r.host !== undefined && r.hostStartTicks !== undefined && readProcess(r.host)?.startTicks === r.hostStartTicks;
  // Checked once: a workerd of a live celld (on the directory this one was copied from) is never
  // killed, even if that celld ends while this waits.
  const leftover = recorded.filter((r) => isLeftover(r) && !hostAlive(r));
  for (const r of leftover) {
    try {
      process.kill(r.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  const end = Date.now() + timeoutMs;
  while (leftover.some(isLeftover)) {
    if (Date.now() > end) {
      const pids = leftover.filter(isLeftover).map((r) => r.pid);
      throw new Error(`workerd left running by an earlier celld (pid ${pids.join(", ")}) did not stop when killed`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  rmSync(recordPath, { force: true });
  return leftover.map((r) => r.pid);
}
