/**
 * CPU time of a host's process tree, split into its Node process and its workerd: on a shared,
 * noisy machine, CPU per message says where the work goes even when wall-clock rates swing.
 * Linux only (/proc); elsewhere there is no figure and the bench says so.
 */
import { readdirSync } from "node:fs";
import { readProcess, type ProcessInfo } from "../packages/runtime/src/workerd/workerd-orphans.ts";

export interface CpuSeconds {
  /** The host's Node process, all its threads. */
  node: number;
  /** Every workerd process under it. */
  workerd: number;
}

// USER_HZ, in which /proc reports times, is 100 on every Linux architecture Node runs on.
const ticksPerSecond = 100;

/** CPU seconds used so far by `rootPid` and its workerd descendants; undefined without /proc. */
export function hostCpuSeconds(rootPid: number): CpuSeconds | undefined {
  const tree = hostProcesses(rootPid);
  if (tree === undefined) return undefined;
  const seconds = (pid: number): number => tree.procs.get(pid)!.cpuTicks / ticksPerSecond;
  return { node: seconds(rootPid), workerd: tree.workerd.reduce((sum, pid) => sum + seconds(pid), 0) };
}

/**
 * A host's process `rootPid` and every workerd below it, read from /proc; undefined without
 * /proc or once the host has gone.
 */
export function hostProcesses(rootPid: number): { procs: Map<number, ProcessInfo>; workerd: number[] } | undefined {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  const procs = new Map<number, ProcessInfo>();
  for (const pid of pids) {
    // undefined: gone between listing and reading
    const proc = readProcess(Number(pid));
    if (proc !== undefined) procs.set(Number(pid), proc);
  }
  if (!procs.has(rootPid)) return undefined;
  const children = new Map<number, number[]>();
  for (const [pid, proc] of procs) children.set(proc.parent, [...(children.get(proc.parent) ?? []), pid]);
  const workerd: number[] = [];
  const stack = [...(children.get(rootPid) ?? [])];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    if (procs.get(pid)!.name.startsWith("workerd")) workerd.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return { procs, workerd };
}
