import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export class DataDirInUseError extends Error {
  readonly code = "ERR_DATA_DIR_IN_USE" as const;
  constructor(dataDir: string, pid: number) {
    super(
      `the data directory ${dataDir} is in use by another celld (pid ${pid}); each queue has one ` +
        `writer, so two hosts cannot share it: stop the other one, or pass another --data`,
    );
    this.name = "DataDirInUseError [ERR_DATA_DIR_IN_USE]";
  }
}

/**
 * Claims a data directory for this process, so that two hosts never write one queue's cell. The
 * claim is a pid file; one left by a process that is gone (a crash, kill -9) is taken over.
 * Returns the release function.
 */
export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, "celld.pid");
  for (;;) {
    try {
      writeFileSync(path, `${process.pid}\n`, { flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const holder = Number.parseInt(readFileSync(path, "utf8"), 10);
    if (Number.isInteger(holder) && isAlive(holder)) throw new DataDirInUseError(dataDir, holder);
    unlinkSync(path);
  }
  return () => {
    try {
      if (Number.parseInt(readFileSync(path, "utf8"), 10) === process.pid) unlinkSync(path);
    } catch {
      // Already gone: nothing to release.
    }
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else; it is alive all the same.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
