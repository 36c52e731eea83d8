/**
 * Operating errors of a cell: bad input, overload, a closed cell, a failed commit. Each has a
 * stable code; callers map codes to what their clients see (HTTP status, Cloudflare error text).
 * Broken invariants are not CellErrors: they are `node:assert` assertions and crash loudly (a
 * LIMIT that is not a positive integer, a pack count below zero).
 */
export type CellErrorCode =
  | "ERR_MESSAGE_TOO_LARGE"
  | "ERR_BATCH_TOO_LARGE"
  | "ERR_BATCH_COUNT"
  | "ERR_DELAY_OUT_OF_RANGE"
  | "ERR_OUT_OF_RANGE"
  | "ERR_INVALID"
  | "ERR_CELL_OVERLOADED"
  | "ERR_CELL_CLOSED"
  | "ERR_STORAGE";

export interface CellErrorDetails {
  /** The input field at fault, as the caller named it (`messages[3].body`, `delaySeconds`). */
  field?: string;
  value?: unknown;
  /** The bound the value broke, in words and number (`at most 128000 bytes`). */
  bound?: string;
  cause?: unknown;
  /** ERR_STORAGE given to a cell's caller: what the failure left behind and what comes next. */
  storage?: StorageFailure;
}

/** What a storage failure came from, as far as the error SQLite or the file system raised tells. */
export type StorageCause = "disk-full" | "read-only" | "permission" | "io-error" | "corrupt" | "newer-format" | "misplaced" | "other";

/**
 * What a caller of a cell acts on when its call failed on storage, besides the words: whether the
 * call may have taken effect, and whether retrying can help before celld restarts. Every
 * ERR_STORAGE a cell's calls reject with carries it (see storage-failure.ts).
 */
export interface StorageFailure {
  /** The queue whose storage failed. */
  queue: string;
  /** The queue's file, where the cell has one: what an operator looks at when it is damaged. */
  file?: string;
  cause: StorageCause;
  /** What SQLite or the file system said: `SQLITE_FULL: database or disk is full`. */
  detail: string;
  /**
   * The call committed, but flushing the log to disk failed: it may or may not have taken effect.
   * False: nothing of the call was written.
   */
  mayHaveTakenEffect: boolean;
  /** The cell takes no more writes until it is opened anew (celld restarted): a flush failed. */
  writesStopped: boolean;
}

const retryableCodes: ReadonlySet<CellErrorCode> = new Set(["ERR_CELL_OVERLOADED", "ERR_STORAGE"]);

export class CellError extends Error {
  readonly code: CellErrorCode;
  readonly field: string | undefined;
  readonly value: unknown;
  readonly bound: string | undefined;
  /**
   * The same call may succeed later, and nothing of this call was written; except that a call
   * whose commit's flush to disk failed is told, in its ERR_STORAGE message and `storage`, that it
   * may have taken effect (see WalSync), and that the queue takes writes again only after a restart.
   */
  readonly retryable: boolean;
  /** ERR_STORAGE from a cell's call: whether it may have taken effect, and whether writes stopped. */
  readonly storage: StorageFailure | undefined;

  constructor(code: CellErrorCode, message: string, details: CellErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = `CellError [${code}]`;
    this.code = code;
    this.field = details.field;
    this.value = details.value;
    this.bound = details.bound;
    this.retryable = retryableCodes.has(code);
    this.storage = details.storage;
  }
}

export function isCellError(error: unknown, code?: CellErrorCode): error is CellError {
  return error instanceof CellError && (code === undefined || error.code === code);
}

/**
 * What a cell tells its host (`onBackgroundError`) when work it does on its own failed: which
 * queue, which work, and when it is tried again; the failure is the `cause`. A storage failure is
 * told by its queue and cause (`SQLITE_FULL: database or disk is full`) rather than by the words
 * meant for a caller, which speak of "this call".
 */
export class BackgroundWorkError extends Error {
  readonly queue: string;
  /** What failed, in words: `moving dead letters to "jobs-dlq"`. */
  readonly work: string;

  constructor(queue: string, work: string, retry: string, cause: unknown) {
    super(`queue "${queue}": ${work} failed, ${retry}: ${failureWords(cause)}`, { cause });
    this.name = "BackgroundWorkError";
    this.queue = queue;
    this.work = work;
  }
}

function failureWords(error: unknown): string {
  const storage = isCellError(error, "ERR_STORAGE") ? error.storage : undefined;
  if (storage === undefined) return error instanceof Error ? error.message : String(error);
  const stopped = storage.writesStopped ? "; it takes no more writes until celld is restarted" : "";
  return `the storage of queue "${storage.queue}" failed (${storage.detail})${stopped}${damagedFileAdvice(storage)}`;
}

/**
 * What an operator does about a damaged queue file, after the words of a failure that found it
 * (empty for any other failure). Retrying cannot help, and the file may still hold what a recovery
 * can read back, which more writes could overwrite.
 */
export function damagedFileAdvice(storage: StorageFailure): string {
  if (storage.cause !== "corrupt") return "";
  const file = storage.file === undefined ? "the queue's file" : `the queue's file ${storage.file}`;
  return `; ${file} is damaged: stop celld, keep a copy of it and its -wal, and recover it as "A damaged queue file" in docs/message-life.md says`;
}

/** Refuses a number outside [min, max] (or not an integer, when asked), naming field and bound. */
export function checkRange(
  field: string,
  value: unknown,
  min: number,
  max: number,
  options: { integer?: boolean; unit?: string; code?: CellErrorCode } = {},
): number {
  // The bound's text is built only for a refusal: a value in range is the hot path (every ack).
  if (typeof value === "number" && Number.isFinite(value) && value >= min && value <= max && (options.integer !== true || Number.isInteger(value))) {
    return value;
  }
  const unit = options.unit === undefined ? "" : ` ${options.unit}`;
  const bound = `${min} to ${max}${unit}`;
  const code = options.code ?? "ERR_OUT_OF_RANGE";
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new CellError(code, `${field} must be a number from ${bound}, got ${describe(value)}`, {
      field,
      value,
      bound,
    });
  }
  if (options.integer === true && !Number.isInteger(value)) {
    throw new CellError(code, `${field} must be a whole number from ${bound}, got ${value}`, {
      field,
      value,
      bound,
    });
  }
  if (value < min || value > max) {
    throw new CellError(code, `${field} must be from ${bound}, got ${value}`, { field, value, bound });
  }
  return value;
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value === null) return "null";
  return typeof value === "object" ? typeof value : String(value);
}
