/**
 * Cloudflare's REST envelope. Every answer under /client/v4 is one of these two shapes: wrangler
 * reads `success`, `result` and `result_info`; the SDK returns `result` and turns a failure into
 * a typed error that carries `errors`.
 */
export interface CloudflareMessage {
  code: number;
  message: string;
}

/** Offset paging as Cloudflare answers it (`?page=N&per_page=M`); wrangler stops once page*per_page >= total_count. */
export interface ResultInfo {
  page: number;
  per_page: number;
  count: number;
  total_count: number;
  total_pages: number;
}

export interface SuccessEnvelope {
  success: true;
  errors: [];
  messages: CloudflareMessage[];
  result: unknown;
  result_info?: ResultInfo;
}

export interface FailureEnvelope {
  success: false;
  errors: CloudflareMessage[];
  messages: CloudflareMessage[];
  result: null;
}

export function successEnvelope(result: unknown, resultInfo?: ResultInfo, messages: CloudflareMessage[] = []): SuccessEnvelope {
  const body: SuccessEnvelope = { success: true, errors: [], messages, result: result === undefined ? null : result };
  if (resultInfo !== undefined) body.result_info = resultInfo;
  return body;
}

export function failureEnvelope(errors: CloudflareMessage[]): FailureEnvelope {
  return { success: false, errors, messages: [], result: null };
}
