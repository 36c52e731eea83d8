import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, onTestFinished, test } from "vitest";
import { WorkerdGuard, readProcess, stopLeftoverWorkerd } from "../src/workerd/workerd-orphans.ts";

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-orphans-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A child of this process that the guards take for workerd: `sleep` under a name starting with
 * "workerd" (what /proc shows as the process's name). Killed after the test.
 */
async function fakeWorkerd(dir: string): Promise<{ pid: number; alive: () => boolean }> {
  const binary = join(dir, "workerd-fake");
  copyFileSync("/bin/sleep", binary);
  const child = spawn(binary, ["60"], { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let ended = false;
  void exited.then(() => (ended = true));
  onTestFinished(async () => {
    child.kill("SIGKILL");
    await exited;
  });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", reject);
  });
  return { pid: child.pid!, alive: () => !ended && readProcess(child.pid!) !== undefined };
}

test.runIf(process.platform === "linux")("a copy of a running host's data directory does not lead the next start on the copy to kill that host's workerd", async () => {
  const dir = tempDir();
  const original = join(dir, "data");
  const copy = join(dir, "copy");
  mkdirSync(original);
  mkdirSync(copy);
  const workerd = await fakeWorkerd(dir);
  // This process is the live celld that started workerd on `original`.
  const guard = WorkerdGuard.start(original, []);
  onTestFinished(() => guard.stop());
  copyFileSync(join(original, "workerd.pid"), join(copy, "workerd.pid"));

  expect(await stopLeftoverWorkerd(copy)).toEqual([]);
  expect(workerd.alive()).toBe(true);
});

test.runIf(process.platform === "linux")("a workerd whose celld has ended is stopped by the next start, whether or not the record names the celld", async () => {
  const dir = tempDir();
  // A celld that has ended: its pid names no process now (or another one, started later).
  const ended = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  const hostPid = ended.pid!;
  const hostStartTicks = readProcess(hostPid)?.startTicks ?? "0";
  await new Promise((resolve) => ended.once("exit", resolve));

  for (const withHost of [true, false]) {
    const data = join(dir, `data-${withHost}`);
    mkdirSync(data);
    const workerd = await fakeWorkerd(dir);
    const entry = { pid: workerd.pid, startTicks: readProcess(workerd.pid)!.startTicks };
    const record = withHost ? { ...entry, host: hostPid, hostStartTicks } : entry;
    writeFileSync(join(data, "workerd.pid"), JSON.stringify([record]));

    expect(await stopLeftoverWorkerd(data)).toEqual([workerd.pid]);
    expect(workerd.alive()).toBe(false);
  }
});

test.runIf(process.platform === "linux")("the record names the celld that started workerd", async () => {
  const dir = tempDir();
  const workerd = await fakeWorkerd(dir);
  const guard = WorkerdGuard.start(dir, []);
  onTestFinished(() => guard.stop());
  const record = JSON.parse(readFileSync(join(dir, "workerd.pid"), "utf8")) as unknown;
  expect(record).toEqual([
    { pid: workerd.pid, startTicks: readProcess(workerd.pid)!.startTicks, host: process.pid, hostStartTicks: readProcess(process.pid)!.startTicks },
  ]);
});
