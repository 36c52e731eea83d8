/** An answer other than 2xx. `code` is stable; see docs/api.md for the list. */
export class QueuesApiError extends Error {
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

  constructor(status: number, details: Record<string, unknown>, retryAfterSeconds?: number) {
    super(typeof details["message"] === "string" ? details["message"] : `HTTP ${status}`);
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
    return this.status === 408 || this.status === 429 || this.status >= 500;
  }
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

