import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";

export class DataDirInUseError extends Error {
  readonly code = "ERR_DATA_DIR_IN_USE" as const;
  constructor(dataDir: string, pid: number | undefined) {
    super(
      `the data directory ${dataDir} is in use by another celld${pid === undefined ? "" : ` (pid ${pid})`}; each queue ` +
        `has one writer, so two hosts cannot share it: stop the other one, or pass another --data`,
    );
    this.name = "DataDirInUseError [ERR_DATA_DIR_IN_USE]";
  }
}

/**
 * Open claims. better-sqlite3 closes a connection it finalizes, and with it goes the lock, so a
 * claim whose release function was dropped would end at the next garbage collection. Held here, a
 * claim lasts until it is released or the process ends.
 */
const heldClaims = new Set<Database.Database>();

/**
 * Claims a data directory for this process, so that two hosts never write one queue's cell.
 *
 * The claim is an exclusive SQLite lock on `celld.lock`, held while the host runs. The OS drops it
 * when the process ends, however it ends, so a crashed host leaves nothing to take over. A pid
 * file alone could not tell a dead holder from a live process that was given the same pid (in a
 * container restarted after a crash, celld often gets the very pid it had) and refused to start.
 * The holder's pid is written to `celld.pid` only so that a refusal can name it.
 * Returns the release function.
 */
export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const pidPath = join(dataDir, "celld.pid");
  // timeout 0: a held lock is an answer, not something to wait out.
  const lock = new Database(join(dataDir, "celld.lock"), { timeout: 0 });
  try {
    // In this mode a connection keeps the exclusive lock of its first write until it closes.
    lock.pragma("locking_mode = EXCLUSIVE");
    lock.exec("BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held (at INTEGER); DELETE FROM held; INSERT INTO held VALUES (unixepoch()); COMMIT");
  } catch (error) {
    lock.close();
    if ((error as { code?: unknown }).code === "SQLITE_BUSY") throw new DataDirInUseError(dataDir, readPid(pidPath));
    throw error;
  }
  try {
    writeFileSync(pidPath, `${process.pid}\n`);
  } catch (error) {
    // The caller gets no release function, so the claim must not outlive this failure.
    lock.close();
    throw error;
  }
  heldClaims.add(lock);
  return () => {
    if (!lock.open) return;
    try {
      if (readPid(pidPath) === process.pid) unlinkSync(pidPath);
    } catch {
      // Already gone: nothing to remove.
    }
    heldClaims.delete(lock);
    lock.close();
  };
}

function readPid(path: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(path, "utf8"), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}
