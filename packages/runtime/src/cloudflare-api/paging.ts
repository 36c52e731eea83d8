import { CloudflareError, cloudflareCodes } from "./cloudflare-errors.ts";
import type { ResultInfo } from "./envelope.ts";

export interface OffsetPage {
  /** 1-based. */
  page: number;
  perPage: number;
}

/**
 * `?page=N&per_page=M` as Cloudflare takes them. wrangler fetches "all pages" by asking for the
 * next page while page*per_page < total_count, and pages some lists itself with per_page, so both
 * must be honoured (a list that ignores per_page makes it loop).
 */
export function readOffsetPage(query: URLSearchParams, perPageDefault: number, perPageMax: number): OffsetPage {
  return {
    page: positive(query, "page", 1, Number.MAX_SAFE_INTEGER) ?? 1,
    perPage: positive(query, "per_page", 1, perPageMax) ?? perPageDefault,
  };
}

function positive(query: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const raw = query.get(name);
  if (raw === null || raw === "") return undefined;
  const value = /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new CloudflareError(400, cloudflareCodes.bodyInvalid, `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** One page of `items` (all of the list, in its order) and the result_info that describes it. */
export function pageOf<T>(items: readonly T[], page: OffsetPage): { result: T[]; resultInfo: ResultInfo } {
  const start = (page.page - 1) * page.perPage;
  const result = items.slice(start, start + page.perPage);
  return {
    result,
    resultInfo: {
      page: page.page,
      per_page: page.perPage,
      count: result.length,
      total_count: items.length,
      total_pages: Math.ceil(items.length / page.perPage),
    },
  };
}
