import { describe, expect, it } from "vitest";
import { machineCpuSnapshot, otherWork, type MachineCpuSnapshot } from "../bench/machine-cpu.ts";

type Entry = [string, { pid: number; parent: number; name: string; ticks: number }];
const proc = (pid: number, parent: number, name: string, ticks: number): Entry => [`${pid}@1`, { pid, parent, name, ticks }];

function snapshot(stealTicks: number, ...processes: Entry[]): MachineCpuSnapshot {
  return { stealTicks, processes: new Map(processes) };
}

describe("the bench's count of the machine's other work", () => {
  it("leaves out the bench and the host's whole tree, and names the rest by what they took", () => {
    const before = snapshot(5, proc(10, 1, "node", 100), proc(20, 10, "node", 50), proc(30, 20, "workerd", 40), proc(79, 2, "kdamond.0", 7), proc(99, 1, "sshd", 3));
    const after = snapshot(9, proc(10, 1, "node", 150), proc(20, 10, "node", 200), proc(30, 20, "workerd", 140), proc(79, 2, "kdamond.0", 52), proc(99, 1, "sshd", 4));
    // The bench (10) and the host (20, with its workerd 30) are left out; kdamond and sshd are not.
    const work = otherWork(before, after, [10, 20]);
    expect(work.othersMs).toBe(460);
    expect(work.stealMs).toBe(40);
    expect(work.top).toEqual([
      { name: "kdamond.0", ms: 450 },
      { name: "sshd", ms: 10 },
    ]);
  });

  it("tells a reused pid from the process that had it", () => {
    const before = snapshot(0, ["40@1", { pid: 40, parent: 1, name: "old", ticks: 500 }]);
    const after = snapshot(0, ["40@7", { pid: 40, parent: 1, name: "new", ticks: 30 }]);
    expect(otherWork(before, after, [10]).top).toEqual([{ name: "new", ms: 300 }]);
  });

  it.runIf(process.platform === "linux")("reads this machine's processes, this one among them", () => {
    const snap = machineCpuSnapshot()!;
    const self = [...snap.processes.values()].find((p) => p.pid === process.pid);
    expect(self?.parent).toBe(process.ppid);
    expect(snap.stealTicks).toBeGreaterThanOrEqual(0);
  });
});
