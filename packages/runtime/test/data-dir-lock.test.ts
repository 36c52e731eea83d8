import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, onTestFinished, test } from "vitest";
import { DataDirInUseError, lockDataDir } from "../src/host/data-dir-lock.ts";

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-lock-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A separate Node process holding the lock until it is killed; resolves once it holds it. It drops
 * the release function and collects garbage before it says so: a claim must not depend on its
 * caller keeping a reference (once it did, and a collection under load freed the lock).
 */
async function holderProcess(dir: string): Promise<{ pid: number; kill: () => Promise<void> }> {
  const lockModule = new URL("../src/host/data-dir-lock.ts", import.meta.url).href;
  const holder = `import { lockDataDir } from ${JSON.stringify(lockModule)}; lockDataDir(${JSON.stringify(dir)}); gc(); console.log("locked"); setInterval(() => {}, 1000);`;
  const child = spawn(
    process.execPath,
    ["--expose-gc", "--import", "tsx", "--input-type=module", "-e", holder],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  onTestFinished(async () => {
    child.kill("SIGKILL");
    await exited;
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => (chunk.toString().includes("locked") ? resolve() : undefined));
    child.once("exit", (code) => reject(new Error(`the lock holder exited (${code}) before it held the lock`)));
  });
  return {
    pid: child.pid!,
    kill: async () => {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

test("a second claim in this process is refused, naming the holder; release frees the directory", () => {
  const dir = dataDir();
  const release = lockDataDir(dir);
  expect(() => lockDataDir(dir)).toThrow(DataDirInUseError);
  expect(() => lockDataDir(dir)).toThrow(`is in use by another celld (pid ${process.pid})`);
  release();
  expect(existsSync(join(dir, "celld.pid"))).toBe(false);
  lockDataDir(dir)();
});

test("a claim held by another process is refused; once that process is killed (-9) it is free at once", async () => {
  const dir = dataDir();
  const holder = await holderProcess(dir);
  const refusal = (() => {
    try {
      lockDataDir(dir);
    } catch (error) {
      return error;
    }
    return undefined;
  })();
  expect(refusal).toBeInstanceOf(DataDirInUseError);
  expect(String(refusal)).toContain(`(pid ${holder.pid})`);
  await holder.kill();
  const release = lockDataDir(dir);
  release();
});

test("a pid file left by a crash does not block, even naming a live process (a reused pid)", () => {
  const dir = dataDir();
  // This process's own pid, and pid 1: both alive, neither holds the lock.
  for (const stale of [process.pid, 1]) {
    writeFileSync(join(dir, "celld.pid"), `${stale}\n`);
    lockDataDir(dir)();
  }
});

test("a claim that cannot write its pid file fails and leaves the directory free", () => {
  const dir = dataDir();
  mkdirSync(join(dir, "celld.pid"));
  expect(() => lockDataDir(dir)).toThrow(/EISDIR/);
  rmSync(join(dir, "celld.pid"), { recursive: true });
  lockDataDir(dir)();
});
