import { isCellError, type CellError, type CellErrorCode } from "@celld/queue-cell";
import { apiLimits } from "./api-limits.ts";

/**
 * Every error code the API answers with, and its HTTP status. Codes are stable: clients branch on
 * them, so a code is never renamed or given another status. The message is for people.
 */
export const apiErrorStatus = {
  /** A field has the wrong type or form (a bad id, a malformed CloudEvent attribute). */
  invalid_argument: 400,
  /** A field the route does not know; typos are refused rather than ignored. */
  unknown_field: 400,
  /** A number, count or length outside its bound. */
  out_of_range: 400,
  /** One message (encoded body plus attributes) over the message bound. */
  message_too_large: 400,
  /** The messages of one call together over the batch bound. */
  batch_too_large: 400,
  /** The body is not valid JSON, UTF-8 or protobuf. */
  malformed_body: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  method_not_allowed: 405,
  not_acceptable: 406,
  already_exists: 409,
  /** The request is well formed but the resource's state forbids it. */
  failed_precondition: 409,
  body_too_large: 413,
  unsupported_media_type: 415,
  /** The request's headers together over their bound (a binary-mode CloudEvent's attributes). */
  headers_too_large: 431,
  /** The queue is taking too many sends at once; retry after Retry-After. Nothing was written. */
  overloaded: 429,
  internal: 500,
  /**
   * The queue's storage failed, or the queue is closing (the server is stopping). The message
   * says whether the call may have taken effect (a storage failure after its commit) and whether
   * a restart is needed; Retry-After is set where retrying can help.
   */
  unavailable: 503,
} as const;

export type ApiErrorCode = keyof typeof apiErrorStatus;

export interface ApiErrorDetails {
  field?: string;
  bound?: string;
  /** Extra members of the error object (publish reports the queues that did commit). */
  extra?: Record<string, unknown>;
  cause?: unknown;
  /** Sent as Retry-After: retrying after this long may succeed. Unset: not before something changes. */
  retryAfterSeconds?: number;
}

export class ApiError extends Error {
  readonly code: ApiErrorCode;
  readonly status: number;
  readonly field: string | undefined;
  readonly bound: string | undefined;
  readonly extra: Record<string, unknown> | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ApiErrorCode, message: string, details: ApiErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = `ApiError [${code}]`;
    this.code = code;
    this.status = apiErrorStatus[code];
    this.field = details.field;
    this.bound = details.bound;
    this.extra = details.extra;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }

  /** The JSON body every error answers with. */
  toJSON(): { error: Record<string, unknown> } {
    const error: Record<string, unknown> = { code: this.code, message: this.message };
    if (this.field !== undefined) error["field"] = this.field;
    if (this.bound !== undefined) error["bound"] = this.bound;
    if (this.extra !== undefined) Object.assign(error, this.extra);
    return { error };
  }
}

const fromCellCode: Record<CellErrorCode, ApiErrorCode> = {
  ERR_MESSAGE_TOO_LARGE: "message_too_large",
  ERR_BATCH_TOO_LARGE: "batch_too_large",
  ERR_BATCH_COUNT: "out_of_range",
  ERR_DELAY_OUT_OF_RANGE: "out_of_range",
  ERR_OUT_OF_RANGE: "out_of_range",
  ERR_INVALID: "invalid_argument",
  ERR_CELL_OVERLOADED: "overloaded",
  ERR_CELL_CLOSED: "unavailable",
  ERR_STORAGE: "unavailable",
};

/**
 * What the client sees of any failure. The edge checks every bound before a cell is called, so a
 * cell's input error reaching here means the two disagree; it still answers 400, not 500.
 * Anything that is neither an ApiError nor a CellError is a bug: 500, with no internals shown.
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (isCellError(error)) {
    const { message, retryAfterSeconds } = refusal(error);
    return new ApiError(fromCellCode[error.code], message, { field: error.field, bound: error.bound, cause: error, retryAfterSeconds });
  }
  return new ApiError("internal", "internal error", { cause: error });
}

/**
 * A cell's refusal in the client's terms: what the call left behind, and when a retry may work.
 * Overload and a closed queue never ran the call. A storage failure may have: only the cell knows
 * at which step it failed, so its words go out as they are (they say whether the call may have
 * taken effect, and whether the queue needs a restart), and its facts decide the Retry-After.
 */
function refusal(error: CellError): { message: string; retryAfterSeconds?: number } {
  switch (error.code) {
    case "ERR_CELL_OVERLOADED":
      return { message: `${error.message}; nothing of this call was written`, retryAfterSeconds: apiLimits.retryAfterSeconds };
    case "ERR_CELL_CLOSED":
      // The server is stopping, or the queue closed between its lookup and the call: the next
      // attempt finds it open, or no server, which a client retries anyway.
      return { message: `${error.message}; nothing of this call was written`, retryAfterSeconds: apiLimits.retryAfterSeconds };
    case "ERR_STORAGE": {
      const storage = error.storage;
      // A queue whose writes stopped takes none until celld restarts, and a file of a newer
      // celld's format, or of another queue, opens after no wait, so a retry cannot work; a
      // failure the cell did not describe promises nothing either.
      if (storage === undefined || storage.writesStopped || storage.cause === "newer-format" || storage.cause === "misplaced") {
        return { message: error.message };
      }
      return { message: error.message, retryAfterSeconds: apiLimits.storageRetryAfterSeconds };
    }
    default:
      return { message: error.message };
  }
}
