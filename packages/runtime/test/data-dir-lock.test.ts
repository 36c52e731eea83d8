import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, onTestFinished, test } from "vitest";
import Database from "better-sqlite3";
import { DataDirInUseError, DataDirUnusableError, lockDataDir } from "../src/host/data-dir-lock.ts";

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

function refusal(claim: () => unknown): Error {
  try {
    claim();
  } catch (error) {
    return error as Error;
  }
  throw new Error("the claim was not refused");
}

test("a directory it cannot write in is refused in one line naming it, the file and the cause", () => {
  const dir = dataDir();
  // A directory where the lock file belongs: SQLite cannot open it, whoever runs the test.
  mkdirSync(join(dir, "celld.lock"));
  const locked = refusal(() => lockDataDir(dir));
  expect(locked).toBeInstanceOf(DataDirUnusableError);
  expect(locked.message).toBe(`the data directory ${dir} cannot be used: opening celld.lock failed: SQLITE_CANTOPEN: unable to open database file`);
  rmSync(join(dir, "celld.lock"), { recursive: true });
  mkdirSync(join(dir, "celld.pid"));
  expect(refusal(() => lockDataDir(dir)).message).toBe(
    `the data directory ${dir} cannot be used: writing celld.pid failed: EISDIR: illegal operation on a directory, open '${join(dir, "celld.pid")}'`,
  );
});

test("a full disk, a read-only file system and a denied permission are named as such, with what to do", () => {
  const dir = dataDir();
  // A real SQLITE_FULL: a connection capped at one page cannot create the lock's table.
  const capped = new Database(join(dir, "capped.sqlite"));
  capped.pragma("max_page_count = 1");
  const full = refusal(() => capped.exec("CREATE TABLE held (at INTEGER)"));
  capped.close();
  const system = (code: string, message: string) => Object.assign(new Error(`${code}: ${message}`), { code });
  expect(
    [full, system("EROFS", "read-only file system, open"), system("EACCES", "permission denied, open")].map(
      (error) => new DataDirUnusableError("/srv/celld", "writing celld.lock", error).message,
    ),
  ).toEqual([
    "the data directory /srv/celld cannot be used: writing celld.lock failed: the disk is full (SQLITE_FULL: database or disk is full); free some space on it, or pass another --data",
    "the data directory /srv/celld cannot be used: writing celld.lock failed: its file system is read-only (EROFS: read-only file system, open); pass a writable --data",
    "the data directory /srv/celld cannot be used: writing celld.lock failed: permission denied (EACCES: permission denied, open); let this user write there, or pass another --data",
  ]);
});

test("a data directory the lock creates is this user's alone (0700): it holds every queue's messages", () => {
  const dir = join(dataDir(), "new", "data");
  lockDataDir(dir)();
  expect(statSync(dir).mode & 0o777).toBe(0o700);
});

test("a --data that is a file, or under one, is refused as not a directory", () => {
  const file = join(dataDir(), "notes.txt");
  writeFileSync(file, "");
  for (const path of [file, join(file, "data")]) {
    const refused = (() => {
      try {
        lockDataDir(path);
      } catch (error) {
        return error;
      }
      throw new Error("locked");
    })();
    expect(refused).toBeInstanceOf(DataDirUnusableError);
    expect((refused as Error).message).toMatch(
      new RegExp(`^the data directory ${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} cannot be used: creating it failed: it, or a directory above it, is a file \\((EEXIST|ENOTDIR)\\); pass another --data$`),
    );
  }
});
