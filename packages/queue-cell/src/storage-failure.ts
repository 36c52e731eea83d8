import { CellError, damagedFileAdvice, isCellError, type StorageCause, type StorageFailure } from "./errors.ts";

/**
 * SQLite's primary result codes and the file system's errno codes, by what they mean to an
 * operator. SQLite reports a full disk as SQLITE_FULL whatever errno it got; a flush (fdatasync)
 * and the file opens around SQLite report errno codes. Extended SQLite codes
 * (`SQLITE_IOERR_WRITE`, `SQLITE_READONLY_DBMOVED`) count as their primary code.
 */
const causeByCode: ReadonlyArray<readonly [string, StorageCause]> = [
  ["SQLITE_FULL", "disk-full"],
  ["ENOSPC", "disk-full"],
  ["EDQUOT", "disk-full"],
  ["SQLITE_READONLY", "read-only"],
  ["EROFS", "read-only"],
  ["SQLITE_PERM", "permission"],
  ["SQLITE_AUTH", "permission"],
  ["EACCES", "permission"],
  ["EPERM", "permission"],
  ["SQLITE_IOERR", "io-error"],
  ["EIO", "io-error"],
  ["SQLITE_CORRUPT", "corrupt"],
  ["SQLITE_NOTADB", "corrupt"],
  // The store's own: a cell file of a layout newer than this code (see cellFormatVersion).
  ["ERR_CELL_FORMAT_NEWER", "newer-format"],
  // The same of the native API's files (its catalog, its keys).
  ["ERR_STORE_FORMAT_NEWER", "newer-format"],
  // The cell's own: a file that holds another queue (see QueueCell's constructor).
  ["ERR_CELL_FILE_MISPLACED", "misplaced"],
];

/**
 * What a storage failure came from: the innermost error of `error`'s cause chain that carries a
 * code (a SqliteError, a Node system error), read as a cause, and in words
 * (`SQLITE_FULL: database or disk is full`, `ENOSPC: no space left on device, fdatasync`).
 */
export function storageCause(error: unknown): { cause: StorageCause; detail: string } {
  let coded: { code: string; message: string } | undefined;
  let innermost: unknown = error;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    innermost = e;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && !isCellError(e)) coded = { code, message: e.message };
  }
  if (coded === undefined) return { cause: "other", detail: innermost instanceof Error ? innermost.message : String(innermost) };
  const { code, message } = coded;
  const match = causeByCode.find(([prefix]) => code === prefix || code.startsWith(`${prefix}_`));
  // Node's system errors start their message with the code already.
  return { cause: match?.[1] ?? "other", detail: message.startsWith(`${code}:`) ? message : `${code}: ${message}` };
}

/**
 * The error a cell's caller gets when its call failed on storage: the store's words, completed
 * with what the call left behind and what comes next, and the same as facts (`storage`) for
 * callers that act on them (the HTTP API's Retry-After). Only the cell knows at which step a call
 * failed: a failed commit wrote nothing; a commit whose flush failed is in the log, and may be
 * found there after a restart. Anything but an ERR_STORAGE passes through unchanged.
 */
export function callStorageError(
  error: unknown,
  queue: string,
  state: { mayHaveTakenEffect: boolean; writesStopped: boolean },
  file?: string,
  /** What the groups committed before the one that failed did, for a call done in several (a purge). */
  partlyDone?: string,
): unknown {
  if (!isCellError(error, "ERR_STORAGE") || error.storage !== undefined) return error;
  const { cause, detail } = storageCause(error);
  // A failed flush's own words already say the call may have taken effect and that a restart is
  // needed (WalSync); a failed commit's say only what failed.
  let message = error.message;
  if (partlyDone !== undefined || !state.mayHaveTakenEffect) {
    message += partlyDone === undefined ? "; nothing of this call was written" : `; ${partlyDone}`;
    // The transaction rolled back and the next may find room: nothing in the cell holds writes
    // back once the disk has space again (docs/message-life.md says how much it needs).
    if (!state.writesStopped && cause === "disk-full") message += ", and writes resume by themselves once the disk has free space";
  }
  const storage: StorageFailure = { queue, ...(file === undefined ? {} : { file }), cause, detail, ...state };
  return new CellError("ERR_STORAGE", message + damagedFileAdvice(storage), { cause: error, storage });
}

/**
 * A cell's failed calls as its callers get them: a storage failure says what the call left behind
 * (callStorageError). One per cell: it remembers that the cell's writes stopped.
 */
export class CallFailures {
  /**
   * A flush failed, or the store found its file damaged: by the CellStore contract, the store
   * takes no more transactions.
   */
  private writesStopped = false;

  constructor(
    private readonly queue: string,
    /** The store's file, if it has one: named when it is found damaged. */
    private readonly file: string | undefined,
    /** Whether the store says it takes no more writes (CellStore.failed). */
    private readonly storeFailed: () => boolean,
  ) {}

  /**
   * "commit": the transaction failed and wrote nothing. "flush": it committed, but the log's flush
   * failed, and the store takes no more writes from then on.
   */
  failed(error: unknown, step: "commit" | "flush"): unknown {
    // A failed flush stops writes; so does one the store met on its own (a checkpoint's flush of
    // the database file).
    if (step === "flush" || this.storeFailed()) this.writesStopped = true;
    return callStorageError(error, this.queue, { mayHaveTakenEffect: step === "flush", writesStopped: this.writesStopped }, this.file);
  }

  /**
   * A replay's or purge's failure in a slice after the first: the slices before it stay done, so
   * the usual "nothing of this call was written" would be wrong. A failed flush says already that
   * the call may have taken effect.
   */
  slicedFailed(error: unknown, call: { doneMessages: number; sliceRows: number; done: string; repeat: string }): unknown {
    const { doneMessages, sliceRows, done, repeat } = call;
    if (doneMessages === 0 || !isCellError(error, "ERR_STORAGE") || error.storage?.mayHaveTakenEffect !== false) return error;
    const words =
      `${doneMessages} messages were ${done} before it failed (in groups of at most ${sliceRows} rows, each committed on its own), ` +
      `and stay ${done}; repeating the call is safe: ${repeat}`;
    return callStorageError(error.cause, this.queue, { mayHaveTakenEffect: true, writesStopped: this.writesStopped }, this.file, words);
  }

  /** The store holds the queue `stored`, not this one (see QueueCell's checkStoredName). */
  misplacedFile(stored: string): CellError {
    const file = this.file === undefined ? "its store" : this.file;
    const cause = Object.assign(new Error(`the file holds queue "${stored}", not "${this.queue}"`), { code: "ERR_CELL_FILE_MISPLACED" });
    return new CellError(
      "ERR_STORAGE",
      `the queue's storage failed: opening ${file}: ${cause.message}: it was copied or renamed here; nothing in it was ` +
        `changed: move it away (queue "${this.queue}" then starts empty), or back to where queue "${stored}" keeps its file`,
      { cause },
    );
  }
}
