import type { CellError, CellErrorCode } from "@celld/queue-cell";

/**
 * Refusals the producer handler makes itself, before a request reaches the cell. All but one say
 * the request is not what workerd's queue binding sends, which through the real binding only a
 * hand-made request to the binding's service can cause; ERR_BODY_NOT_JSON is a json message whose
 * body workerd could not encode as JSON (message-format.ts).
 */
export type ProtocolErrorCode = "ERR_CONTENT_TYPE" | "ERR_JSON_MALFORMED" | "ERR_JSON_INVALID" | "ERR_NO_ROUTE" | "ERR_BODY_NOT_JSON";

export type ProducerErrorCode = CellErrorCode | ProtocolErrorCode;

export interface CloudflareQueueError {
  /** HTTP status of the reply to workerd. */
  status: number;
  /** Cloudflare Queues error code (developers.cloudflare.com/queues/reference/error-codes). */
  code: number;
  /** Cloudflare's name for the error, the first words of what the Worker sees. */
  name: string;
}

/**
 * What a Worker author sees for each refusal: Cloudflare's code and error name, so the text they
 * search for is the one Cloudflare documents. Every delay refusal is 10202, as for a batch delay;
 * content types that are not v8/json/text/bytes are 10203. ERR_CELL_CLOSED and ERR_STORAGE are
 * celld's own failures; Cloudflare's catch-all 15000 says so without inventing a code, and the
 * detail says whether the message was sent and whether a retry can work (describeCellError).
 * workerd rejects send() alike for every status that is not 200, with the cause and code (or the
 * status text, which carries the same), so the status is for clients of the REST shape: 503 for
 * both, a queue that cannot take the message now, as the native API answers them; 500 would say
 * a bug.
 */
export const cloudflareErrors: Readonly<Record<ProducerErrorCode, CloudflareQueueError>> = {
  ERR_MESSAGE_TOO_LARGE: { status: 413, code: 10204, name: "MessageSizeOutOfBounds" },
  ERR_BATCH_TOO_LARGE: { status: 413, code: 10205, name: "BatchSizeOutOfBounds" },
  ERR_BATCH_COUNT: { status: 413, code: 10206, name: "BatchCountOutOfBounds" },
  ERR_DELAY_OUT_OF_RANGE: { status: 400, code: 10202, name: "BatchDelayInvalid" },
  ERR_CONTENT_TYPE: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
  // The message's metadata (its content type) does not describe its body.
  ERR_BODY_NOT_JSON: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
  ERR_INVALID: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
  ERR_OUT_OF_RANGE: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
  ERR_JSON_INVALID: { status: 400, code: 10207, name: "JSONRequestBodyInvalid" },
  ERR_JSON_MALFORMED: { status: 400, code: 10208, name: "JSONRequestBodyMalformed" },
  ERR_CELL_OVERLOADED: { status: 429, code: 10250, name: "QueueOverloaded" },
  ERR_CELL_CLOSED: { status: 503, code: 15000, name: "UnknownInternalError" },
  ERR_STORAGE: { status: 503, code: 15000, name: "UnknownInternalError" },
  ERR_NO_ROUTE: { status: 404, code: 15000, name: "UnknownInternalError" },
};

/** A request the handler refuses before it reaches the cell. */
export class ProtocolError extends Error {
  readonly code: ProtocolErrorCode;

  constructor(code: ProtocolErrorCode, message: string) {
    super(message);
    this.name = `ProtocolError [${code}]`;
    this.code = code;
  }
}

export interface ProducerReply {
  status: number;
  statusText: string;
  headers: Record<string, string>;
  body: string;
}

/** Which Worker call a request came from; a single send() names its message "message". */
export type ProducerCall = "send" | "sendBatch";

/**
 * The refusal as workerd turns it into the Worker's error. workerd 1.20260426 with
 * `queue_expose_error_codes` (the default from compatibility date 2026-03-12) throws
 * `Error("<CF-Queues-Error-Cause> (<CF-Queues-Error-Code>)")`; without it,
 * `Error("Queue send failed: <statusText>")` (or "Queue sendBatch failed: ..."). The status text
 * carries the same cause and code, so both kinds of Worker read the same words.
 */
export function errorReply(code: ProducerErrorCode, detail: string): ProducerReply {
  const error = cloudflareErrors[code];
  const cause = headerSafe(`${error.name}: ${detail}`);
  return {
    status: error.status,
    statusText: `${cause} (${error.code})`,
    headers: {
      "content-type": "application/json",
      "cf-queues-error-cause": cause,
      "cf-queues-error-code": String(error.code),
    },
    // Cloudflare's REST shape, for clients that call the service without workerd.
    body: JSON.stringify({ success: false, errors: [{ code: error.code, message: cause }] }),
  };
}

/**
 * The cell's refusal in the Worker's terms. The cell names fields as its send() input has them
 * (`messages[0].body`); a single send() has no array, so its message is "message".
 */
export function describeCellError(error: CellError, call: ProducerCall): string {
  const { value, bound } = error;
  // A closed queue never ran the call (an ERR_STORAGE's own words say what its call left behind).
  if (error.code === "ERR_CELL_CLOSED") return `${error.message}; nothing of this call was written`;
  if (value === undefined || bound === undefined) return error.message;
  switch (error.code) {
    case "ERR_MESSAGE_TOO_LARGE":
      return `${call === "send" ? "message" : messageIndex(error.field)} is ${String(value)} bytes; a message may be ${bound}`;
    case "ERR_BATCH_TOO_LARGE":
      return `the messages of the batch are ${String(value)} bytes together; a batch may be ${bound}`;
    case "ERR_BATCH_COUNT":
      return `the batch has ${String(value)} messages; a batch may have ${bound}`;
    default:
      return error.message;
  }
}

function messageIndex(field: string | undefined): string {
  const match = /^messages\[\d+\]/.exec(field ?? "");
  return match === null ? "a message" : match[0];
}

// Header values and the status line take visible ASCII only; a cause quoting a hand-made request
// could carry anything.
const headerTextMaxChars = 1000;

function headerSafe(text: string): string {
  const clean = text.replace(/[^\x20-\x7e]/g, "?");
  return clean.length > headerTextMaxChars ? `${clean.slice(0, headerTextMaxChars - 3)}...` : clean;
}
