import { ApiError, toApiError, type ApiErrorCode } from "../api/errors.ts";
import { failureEnvelope, type FailureEnvelope } from "./envelope.ts";
import { isPastExact, pastExactWords, shownLiteral } from "../api/fields.ts";

/**
 * A refusal in Cloudflare's terms: the HTTP status and the `errors[0].code` clients branch on
 * (wrangler turns the code into its error's `code`; the SDK picks its error class by status).
 */
export class CloudflareError extends Error {
  readonly status: number;
  readonly code: number;
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, code: number, message: string, options: { cause?: unknown; retryAfterSeconds?: number } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = `CloudflareError [${code}]`;
    this.status = status;
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** The body every refusal answers with. */
  toJSON(): FailureEnvelope {
    return failureEnvelope([{ code: this.code, message: this.message }]);
  }
}

/**
 * A number in a body refused by its bound. JSON.parse has rounded one past 2^53 - 1 (or made it
 * Infinity, which JSON.stringify writes as null), so the mount quotes the text the body's scan kept
 * for `field` (json-body.ts) instead of the parsed value: the same rule as the native API's.
 */
export class CloudflareNumberError extends CloudflareError {
  constructor(
    status: number,
    code: number,
    readonly field: string,
    private readonly words: string,
    value: unknown,
  ) {
    super(status, code, `${words}, got ${typeof value === "number" && isPastExact(value) ? pastExactWords(value) : JSON.stringify(value)}`);
  }

  quoting(literal: string): CloudflareError {
    return new CloudflareError(this.status, this.code, `${this.words}, got ${shownLiteral(literal)}`);
  }
}

/** Cloudflare's own codes that mean the same everywhere under /client/v4. */
export const cloudflareCodes = {
  /** No token, or one that is malformed, unknown or revoked (401). */
  authentication: 10000,
  /** A valid token without the permission (celld: scope) the call needs, or another account's path (403). */
  permission: 9109,
  /** No route for the method and path (404 / 405). */
  noRoute: 7003,
  methodNotAllowed: 7001,
  /** The body is not valid JSON (Queues' JSONRequestBodyMalformed, used for every route here). */
  bodyMalformed: 10208,
  /** The body is JSON of the wrong shape: a field missing, of the wrong type or out of its bound. */
  bodyInvalid: 10207,
  internal: 10001,
} as const;

/**
 * The status and code each native ApiError becomes unless the route names its own (a queue
 * route's not_found is QueueNotFound 10104; a Workers route's is 10007).
 */
const defaults: Record<ApiErrorCode, { status: number; code: number }> = {
  invalid_argument: { status: 400, code: cloudflareCodes.bodyInvalid },
  unknown_field: { status: 400, code: cloudflareCodes.bodyInvalid },
  out_of_range: { status: 400, code: cloudflareCodes.bodyInvalid },
  message_too_large: { status: 400, code: 10204 },
  batch_too_large: { status: 400, code: 10205 },
  malformed_body: { status: 400, code: cloudflareCodes.bodyMalformed },
  unauthenticated: { status: 401, code: cloudflareCodes.authentication },
  permission_denied: { status: 403, code: cloudflareCodes.permission },
  not_found: { status: 404, code: cloudflareCodes.noRoute },
  method_not_allowed: { status: 405, code: cloudflareCodes.methodNotAllowed },
  not_acceptable: { status: 406, code: cloudflareCodes.bodyInvalid },
  // 409 is retried by the SDK: the answer says not to (x-should-retry, see handler.ts).
  already_exists: { status: 409, code: cloudflareCodes.bodyInvalid },
  failed_precondition: { status: 409, code: cloudflareCodes.bodyInvalid },
  body_too_large: { status: 413, code: 10205 },
  unsupported_media_type: { status: 415, code: cloudflareCodes.bodyInvalid },
  headers_too_large: { status: 431, code: cloudflareCodes.bodyInvalid },
  overloaded: { status: 429, code: 10250 },
  internal: { status: 500, code: cloudflareCodes.internal },
  unavailable: { status: 503, code: cloudflareCodes.internal },
};

/** Per-route overrides of the codes above, by native error code. */
export type CloudflareCodeMap = Partial<Record<ApiErrorCode, number>>;

/**
 * What the client sees of any failure: a CloudflareError as it is; a native ApiError or a cell's
 * error (shared code under the adapter throws those) with its message and the route's code, or
 * the default one; anything else is a bug, 500 with no internals.
 */
export function toCloudflareError(error: unknown, codes: CloudflareCodeMap = {}): CloudflareError {
  if (error instanceof CloudflareError) return error;
  const api: ApiError = toApiError(error);
  const mapped = defaults[api.code];
  const message = api.code === "internal" ? "internal error" : api.message;
  return new CloudflareError(mapped.status, codes[api.code] ?? mapped.code, message, {
    cause: error,
    retryAfterSeconds: api.retryAfterSeconds,
  });
}

export function isInternal(error: CloudflareError): boolean {
  return error.status === 500;
}
