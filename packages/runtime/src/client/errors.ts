/**
 * An answer other than 2xx, or no answer at all (`network_error`, status 0). `code` is stable; see
 * docs/api.md for the list.
 */
export class QueuesApiError extends Error {
  /** The answer's HTTP status; 0 when none came (`network_error`). */
  readonly status: number;
  readonly code: string;
  readonly field: string | undefined;
  readonly bound: string | undefined;
  /** The whole `error` object of the answer. */
  readonly details: Record<string, unknown>;
  /**
   * The answer's Retry-After: seconds after which the call may succeed (1 for a closing queue or
   * an overloaded one, 10 for a full disk). Absent where waiting alone cannot help.
   */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, details: Record<string, unknown>, retryAfterSeconds?: number, cause?: unknown) {
    super(typeof details["message"] === "string" ? details["message"] : `HTTP ${status}`, cause === undefined ? undefined : { cause });
    this.name = `QueuesApiError [${String(details["code"] ?? status)}]`;
    this.status = status;
    this.code = typeof details["code"] === "string" ? details["code"] : "unknown";
    this.field = typeof details["field"] === "string" ? details["field"] : undefined;
    this.bound = typeof details["bound"] === "string" ? details["bound"] : undefined;
    this.details = details;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  /**
   * The server may answer otherwise later (overload, unavailable, timeout). Not a promise that
   * nothing was written: a 503's message says when the call may have taken effect, and when the
   * queue takes no writes until celld is restarted.
   */
  get retryable(): boolean {
    return this.status === networkStatus || this.status === 408 || this.status === 429 || this.status >= 500;
  }
}

const networkStatus = 0;

/** Failures to reach celld before the request could be written: nothing of the call was sent. */
const connectCodes = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT"]);
/** Failures of a connection once the request was on it, or while its answer came. */
const connectionCodes = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE", "ETIMEDOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

/**
 * undici's error for a call that got no answer, as a `network_error`. Anything else is returned
 * as it is: a caller's abort, a closed or destroyed client (every later call fails the same way,
 * so no retry can help), or a bug.
 */
export function networkErrorFrom(error: unknown, origin: string): unknown {
  const code = errorCode(error);
  if (code === undefined) return error;
  const reason = error instanceof Error && error.message !== "" ? error.message : code;
  if (connectCodes.has(code) || (error as { syscall?: unknown }).syscall === "connect") {
    return new QueuesApiError(networkStatus, { code: "network_error", message: `could not connect to ${origin} (${reason}); nothing of this call was sent` }, undefined, error);
  }
  if (connectionCodes.has(code)) {
    return new QueuesApiError(
      networkStatus,
      { code: "network_error", message: `the connection to ${origin} failed before the answer came (${reason}); the call may have taken effect` },
      undefined,
      error,
    );
  }
  return error;
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") return code;
  // Node's connect to a name with several addresses (localhost) fails with one error per address.
  if (error instanceof AggregateError) return errorCode(error.errors[0]);
  return undefined;
}

/** The error for a non-2xx answer: the API's own error object when the body is one. */
export function errorFrom(status: number, text: string, retryAfter?: string | string[]): QueuesApiError {
  const seconds = retryAfterSeconds(retryAfter);
  try {
    const parsed = JSON.parse(text) as { error?: Record<string, unknown> };
    if (parsed.error !== undefined) return new QueuesApiError(status, parsed.error, seconds);
  } catch {
    // Not the API's JSON (a proxy's page, Node's own 408): keep the status.
  }
  return new QueuesApiError(status, { code: "unknown", message: `HTTP ${status}: ${text.slice(0, 200)}` }, seconds);
}

/** Retry-After as delay-seconds, the form celld sends; an HTTP date (a proxy's) is not read. */
function retryAfterSeconds(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  return value !== undefined && /^\d+$/.test(value.trim()) ? Number(value.trim()) : undefined;
}

