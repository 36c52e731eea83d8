import { apiLimits } from "./api-limits.ts";
import { ApiError } from "../wire/api-error.ts";
import { checkInt } from "./fields.ts";

/**
 * Pages of a list: `page_size` and an opaque `page_token` in; `next_page_token` out, absent on
 * the last page. A token is the position after the last item of the previous page, so items
 * added or removed between pages shift nothing.
 */
export interface PageRequest {
  size: number;
  /** The decoded position, or "" for the first page. */
  after: string;
}

export function readPage(query: URLSearchParams, sizeDefault: number, sizeMax: number): PageRequest {
  const rawSize = query.get("page_size");
  let size = sizeDefault;
  if (rawSize !== null) {
    size = checkInt("page_size", /^\d{1,9}$/.test(rawSize) ? Number(rawSize) : rawSize, 1, sizeMax);
  }
  const token = query.get("page_token");
  if (token === null || token === "") return { size, after: "" };
  const after = token.length <= apiLimits.pageTokenCharsMax ? decodeToken(token) : undefined;
  if (after === undefined) {
    throw new ApiError("invalid_argument", "page_token is not a token this list returned", {
      field: "page_token",
      bound: "a next_page_token from the previous page",
    });
  }
  return { size, after };
}

/**
 * A page of a list ordered by a cell's sequence numbers (dead letters, waiting messages): its token
 * is the last sequence number shown, 0 before the first page.
 */
export function readSeqPage(query: URLSearchParams, sizeDefault: number, sizeMax: number): { page: PageRequest; afterSeq: number } {
  const page = readPage(query, sizeDefault, sizeMax);
  const afterSeq = page.after === "" ? 0 : Number(page.after);
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
    throw new ApiError("invalid_argument", "page_token is not a token this list returned", {
      field: "page_token",
      bound: "a next_page_token from the previous page",
    });
  }
  return { page, afterSeq };
}

export function pageTokenAfter(position: string): string {
  return Buffer.from(`p1:${position}`).toString("base64url");
}

function decodeToken(token: string): string | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
  const text = Buffer.from(token, "base64url").toString("utf8");
  return text.startsWith("p1:") && text.length > 3 ? text.slice(3) : undefined;
}

/** Refuses query parameters the route does not take, and repeated ones. */
export function checkQuery(query: URLSearchParams, allowed: readonly string[]): void {
  const seen = new Set<string>();
  for (const name of query.keys()) {
    if (!allowed.includes(name)) {
      const known = allowed.length === 0 ? "none" : allowed.join(", ");
      throw new ApiError("unknown_field", `unknown query parameter ${name}; this route takes ${known}`, {
        field: name,
        bound: allowed.length === 0 ? "no query parameters" : `one of: ${known}`,
      });
    }
    if (seen.has(name)) {
      throw new ApiError("invalid_argument", `query parameter ${name} is given more than once`, { field: name, bound: "once" });
    }
    seen.add(name);
  }
}
