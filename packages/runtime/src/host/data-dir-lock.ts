import { accessSync, constants, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { isCellError, storageCause, type StorageCause, type StorageFailure } from "@celld/queue-cell";

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
 * The data directory cannot be written: a full disk, a read-only file system, no permission. One
 * line for the operator, naming the directory, the file and the cause, with what to do about it.
 */
export class DataDirUnusableError extends Error {
  readonly code = "ERR_DATA_DIR_UNUSABLE" as const;
  constructor(dataDir: string, what: string, error: unknown, reason = reasonOf(dataDir, error)) {
    super(`the data directory ${dataDir} cannot be used: ${what} failed: ${reason}`, { cause: error });
    this.name = "DataDirUnusableError [ERR_DATA_DIR_UNUSABLE]";
  }
}

function reasonOf(dataDir: string, error: unknown): string {
  const { cause, detail } = whyNotWritable(dataDir, storageCause(error));
  return reasonFor(cause, detail, isCellError(error, "ERR_STORAGE") ? error.storage?.file : undefined);
}

/**
 * A queue's own file that cannot be opened (damaged, a newer celld's, another queue's), in the
 * host's words: the cell's words are a refused call's ("nothing of this call was written"), and
 * at start there was no call.
 */
export function unopenedFileReason(storage: StorageFailure): string {
  return reasonFor(storage.cause, storage.detail, storage.file);
}

function reasonFor(cause: StorageCause, detail: string, file: string | undefined): string {
  switch (cause) {
    case "disk-full":
      return `the disk is full (${detail}); free some space on it, or pass another --data`;
    case "read-only":
      return `its file system is read-only (${detail}); pass a writable --data`;
    case "permission":
      return `permission denied (${detail}); let this user write there, or pass another --data`;
    case "io-error":
      return `an I/O error (${detail}); the disk may be failing`;
    case "corrupt":
      return (
        `${file === undefined ? "the file" : `its file ${file}`} is damaged (${detail}): ` +
        `keep a copy of it and its -wal, and recover it as "A damaged queue file" in docs/message-life.md says`
      );
    case "misplaced":
      return `${detail.replace(/^ERR_CELL_FILE_MISPLACED: /, "")}${file === undefined ? "" : ` (${file})`}: it was copied or renamed there; nothing in it was changed: move it away`;
    case "newer-format":
      return `its file was written by a newer celld (${detail.replace(/^ERR_(CELL|STORE)_FORMAT_NEWER: /, "")}); nothing in it was changed: run that celld or a newer one on this data directory`;
    case "other":
      return detail;
  }
}

/**
 * SQLite says only "unable to open database file" when it cannot create or open the file: a
 * directory that may not be written (read-only, no permission) says why, when that is the reason.
 */
function whyNotWritable(dataDir: string, found: ReturnType<typeof storageCause>): ReturnType<typeof storageCause> {
  if (found.cause !== "other") return found;
  try {
    accessSync(dataDir, constants.W_OK);
  } catch (denied) {
    const probed = storageCause(denied);
    if (probed.cause !== "other") return probed;
  }
  return found;
}

/**
 * A failure of the file system or SQLite in `what` (a queue's storage included), as the data
 * directory's; anything else (a bug) as it is.
 */
export function dataDirUnusable(dataDir: string, what: string, error: unknown): unknown {
  // SQLite's and the file system's errors carry a code.
  return typeof (error as { code?: unknown }).code === "string" ? new DataDirUnusableError(dataDir, what, error) : error;
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
  try {
    // It holds every queue's messages and the Workers' storage: no other local user's to read.
    // One that exists keeps its mode, which is its owner's choice.
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    // mkdir's own words ("file already exists, mkdir ...") read as if the directory were there.
    const code = (error as { code?: unknown }).code;
    if (code === "EEXIST" || code === "ENOTDIR") {
      throw new DataDirUnusableError(dataDir, "creating it", error, `it, or a directory above it, is a file (${code}); pass another --data`);
    }
    throw dataDirUnusable(dataDir, "creating it", error);
  }
  const pidPath = join(dataDir, "celld.pid");
  let lock: Database.Database;
  try {
    // timeout 0: a held lock is an answer, not something to wait out.
    lock = new Database(join(dataDir, "celld.lock"), { timeout: 0 });
  } catch (error) {
    throw dataDirUnusable(dataDir, "opening celld.lock", error);
  }
  try {
    // In this mode a connection keeps the exclusive lock of its first write until it closes.
    lock.pragma("locking_mode = EXCLUSIVE");
    lock.exec("BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held (at INTEGER); DELETE FROM held; INSERT INTO held VALUES (unixepoch()); COMMIT");
  } catch (error) {
    lock.close();
    if ((error as { code?: unknown }).code === "SQLITE_BUSY") throw new DataDirInUseError(dataDir, readPid(pidPath));
    throw dataDirUnusable(dataDir, "writing celld.lock", error);
  }
  try {
    writeFileSync(pidPath, `${process.pid}\n`);
  } catch (error) {
    // The caller gets no release function, so the claim must not outlive this failure.
    lock.close();
    throw dataDirUnusable(dataDir, "writing celld.pid", error);
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
