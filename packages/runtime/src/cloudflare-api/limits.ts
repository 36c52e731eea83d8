import { apiLimits } from "../api/api-limits.ts";

/** Bounds only the Cloudflare adapter's HTTP edge has; the queue bounds are queue-cell's `limits`. */
export const cloudflareLimits = {
  /** A request body unless the route says otherwise (the native API's control bound). */
  bodyBytesDefault: apiLimits.controlBodyBytesMax,
  /** A page of a list when `per_page` is not given. */
  perPageDefault: 100,
  perPageMax: 1000,
} as const;
