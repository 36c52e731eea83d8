/**
 * The API's errors as they travel: the stable codes, their HTTP statuses and the JSON body every
 * error answers with. The server throws them; the client builds the same refusal for a body it
 * will not send (tooLarge). What a cell's error becomes is the server's (api/errors.ts).
 */

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

/** The refusal of a body over `capBytes`; the client says it too, of a body it will not send. */
export function tooLarge(capBytes: number): ApiError {
  return new ApiError("body_too_large", `the request body is larger than ${capBytes} bytes`, {
    field: "body",
    bound: `at most ${capBytes} bytes`,
  });
}
