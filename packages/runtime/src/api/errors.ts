import { isCellError, type CellError, type CellErrorCode } from "@celld/queue-cell";
import { ApiError, type ApiErrorCode } from "../wire/api-error.ts";
import { apiLimits } from "./api-limits.ts";

// The codes, their statuses and ApiError itself travel to the client too: they are wire code
// (wire/api-error.ts). Exported here as well for the routes, which meet them with toApiError.
export { ApiError, apiErrorStatus, type ApiErrorCode, type ApiErrorDetails } from "../wire/api-error.ts";

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
