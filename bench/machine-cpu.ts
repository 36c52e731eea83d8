/**
 * The CPU the rest of the machine took while a workload ran: other processes, the kernel's own
 * threads, and the hypervisor (steal). On the 2-core virtual machine of the figures in
 * docs/performance.md a kernel thread, kdamond (the VM's memory monitor), takes a core for 9-44
 * ms every 0.54 s; every send in flight then waits for the one core left, and that, not the host,
 * set most of the send() p99 there. The bench prints this beside the latency so that a run says
 * what held it. Linux only (/proc); elsewhere there is no figure.
 */
import { readdirSync, readFileSync } from "node:fs";
import { readProcess } from "../packages/runtime/src/workerd/workerd-orphans.ts";

// USER_HZ, in which /proc reports times, is 100 on every Linux architecture Node runs on.
const msPerTick = 10;

export interface MachineCpuSnapshot {
  /** Time the hypervisor ran something else while this machine's CPUs had work, ticks. */
  stealTicks: number;
  /** Each process's CPU so far, by `pid@start` (a pid alone may be reused), with its name and parent. */
  processes: Map<string, { name: string; pid: number; parent: number; ticks: number }>;
}

export interface OtherWork {
  /**
   * CPU time of the processes outside `own`, kernel threads included, ms. Not /proc/stat's busy
   * time less the bench's: the two are counted differently (ticks against run time) and in a run
   * here that difference came out below a single kernel thread's share.
   */
  othersMs: number;
  stealMs: number;
  /** The processes outside `own` that took the most, ms, the largest first. */
  top: Array<{ name: string; ms: number }>;
}

export function machineCpuSnapshot(): MachineCpuSnapshot | undefined {
  let stat: string;
  let entries: string[];
  try {
    stat = readFileSync("/proc/stat", "utf8");
    entries = readdirSync("/proc");
  } catch {
    return undefined;
  }
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice
  const fields = stat.slice(0, stat.indexOf("\n")).trim().split(/\s+/).slice(1).map(Number);
  const steal = fields[7] ?? 0;
  const processes: MachineCpuSnapshot["processes"] = new Map();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const p = readProcess(Number(entry));
    if (p !== undefined) processes.set(`${p.pid}@${p.startTicks}`, { name: p.name, pid: p.pid, parent: p.parent, ticks: p.cpuTicks });
  }
  return { stealTicks: steal, processes };
}

/**
 * What ran between two snapshots besides `ownRoots` and their descendants (as the later snapshot
 * has them): the bench and the host it drives. A process that started and ended in between is not
 * seen, nor is interrupt time.
 */
export function otherWork(before: MachineCpuSnapshot, after: MachineCpuSnapshot, ownRoots: readonly number[]): OtherWork {
  const children = new Map<number, number[]>();
  for (const p of after.processes.values()) children.set(p.parent, [...(children.get(p.parent) ?? []), p.pid]);
  const own = new Set<number>();
  const stack = [...ownRoots];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    if (own.has(pid)) continue;
    own.add(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  const others: Array<{ name: string; ms: number }> = [];
  for (const [key, p] of after.processes) {
    const used = p.ticks - (before.processes.get(key)?.ticks ?? 0);
    if (used > 0 && !own.has(p.pid)) others.push({ name: p.name, ms: used * msPerTick });
  }
  others.sort((a, b) => b.ms - a.ms);
  return {
    othersMs: others.reduce((sum, o) => sum + o.ms, 0),
    stealMs: (after.stealTicks - before.stealTicks) * msPerTick,
    top: others.slice(0, 3),
  };
}
