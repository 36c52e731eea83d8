import { DeployError } from "../deploy/deploy-errors.ts";

/**
 * The filters of `wrangler tail`, as wrangler 4.86 sends them in the body of `POST .../tails`
 * (`{"filters": [{"outcome": [...]}, {"method": [...]}, ...]}`, one object per flag), applied to
 * each trace event as Cloudflare does: every filter given must match (AND), any value of a list
 * filter may (OR). Request-only filters (method, header, client_ip) pass no event without a request
 * (queue batches, cron runs).
 */
export interface TailFilter {
  /** Kept with this probability (`--sampling-rate`, between 0 and 1). */
  samplingRate?: number;
  /** The event's `outcome`, one of these (`--status`: error is exception, exceededCpu, exceededMemory, unknown). */
  outcomes?: ReadonlySet<string>;
  /** The request's method, upper case (`--method`). */
  methods?: ReadonlySet<string>;
  /** The request has header `key` (lower case) and, with `value`, that value (`--header "key: value"`). */
  header?: { key: string; value?: string };
  /** The request's client address, one of these (`--ip`; "self" already resolved). */
  clientIps?: ReadonlySet<string>;
  /** Text in one of the event's console messages (`--search`). */
  query?: string;
}

const known = ["sampling_rate", "outcome", "method", "header", "client_ip", "query", "scriptVersion"] as const;

/** The body of `POST .../tails`; `selfIp` is the address that asked, for `--ip self`. Bad input: a clear error. */
export function parseTailFilters(body: unknown, selfIp: string | undefined): TailFilter {
  const filter: TailFilter = {};
  if (body === undefined || body === null) return filter;
  const list = (body as { filters?: unknown }).filters;
  if (list === undefined) return filter;
  if (!Array.isArray(list)) throw bad("filters", "must be an array of filter objects", list);
  for (const [i, item] of list.entries()) {
    if (typeof item !== "object" || item === null) throw bad(`filters[${i}]`, "must be an object", item);
    for (const [key, value] of Object.entries(item as Record<string, unknown>)) {
      const at = `filters[${i}].${key}`;
      if (key === "sampling_rate") {
        if (typeof value !== "number" || !(value > 0 && value <= 1)) throw bad(at, "must be a number above 0 and at most 1", value);
        filter.samplingRate = value;
      } else if (key === "outcome") filter.outcomes = new Set(strings(at, value));
      else if (key === "method") filter.methods = new Set(strings(at, value).map((m) => m.toUpperCase()));
      else if (key === "header") filter.header = header(at, value);
      else if (key === "client_ip") filter.clientIps = new Set(strings(at, value).map((ip) => (ip === "self" ? normalIp(selfIp ?? "") : normalIp(ip))));
      else if (key === "query") {
        if (typeof value !== "string") throw bad(at, "must be a string", value);
        filter.query = value;
      } else if (key === "scriptVersion") {
        // A deployment has one version at 100% on celld: every event is of it.
      } else throw bad(at, `is not a tail filter (known: ${known.join(", ")})`, value);
    }
  }
  return filter;
}

/** Whether `event` (a trace item, as workerd makes it) passes `filter`; `random` in [0, 1) for sampling. */
export function tailEventPasses(filter: TailFilter, event: unknown, random: () => number = Math.random): boolean {
  const item = (event ?? {}) as TraceShape;
  if (filter.outcomes !== undefined && !filter.outcomes.has(String(item.outcome))) return false;
  const request = item.event?.request;
  const requestFilters = filter.methods !== undefined || filter.header !== undefined || filter.clientIps !== undefined;
  if (requestFilters && (request === undefined || request === null)) return false;
  if (filter.methods !== undefined && !filter.methods.has(String(request?.method).toUpperCase())) return false;
  if (filter.header !== undefined) {
    const value = headerValue(request?.headers, filter.header.key);
    if (value === undefined || (filter.header.value !== undefined && value.trim() !== filter.header.value)) return false;
  }
  if (filter.clientIps !== undefined) {
    const ip = headerValue(request?.headers, "cf-connecting-ip");
    if (ip === undefined || !filter.clientIps.has(normalIp(ip))) return false;
  }
  if (filter.query !== undefined && !(item.logs ?? []).some((log) => messageText(log.message).includes(filter.query!))) return false;
  if (filter.samplingRate !== undefined && random() >= filter.samplingRate) return false;
  return true;
}

interface TraceShape {
  outcome?: unknown;
  event?: { request?: { method?: unknown; headers?: unknown } | null } | null;
  logs?: { message?: unknown }[];
}

/** A console call's arguments as one line, as wrangler prints them: strings as they are, others as JSON. */
function messageText(message: unknown): string {
  const parts = Array.isArray(message) ? message : [message];
  return parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" ");
}

function headerValue(headers: unknown, key: string): string | undefined {
  if (typeof headers !== "object" || headers === null) return undefined;
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (name.toLowerCase() === key && typeof value === "string") return value;
  }
  return undefined;
}

/** `::ffff:127.0.0.1` (Node's IPv4-on-IPv6 socket address) is 127.0.0.1. */
function normalIp(ip: string): string {
  const trimmed = ip.trim().toLowerCase();
  return trimmed.startsWith("::ffff:") && trimmed.includes(".") ? trimmed.slice(7) : trimmed;
}

function header(at: string, value: unknown): { key: string; value?: string } {
  const { key, query } = (value ?? {}) as { key?: unknown; query?: unknown };
  if (typeof key !== "string" || key.trim() === "") throw bad(`${at}.key`, "must be a header name", key);
  if (query !== undefined && query !== null && typeof query !== "string") throw bad(`${at}.query`, "must be a string", query);
  return typeof query === "string" ? { key: key.trim().toLowerCase(), value: query.trim() } : { key: key.trim().toLowerCase() };
}

function strings(at: string, value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === "string")) throw bad(at, "must be a non-empty array of strings", value);
  return value as string[];
}

function bad(at: string, rule: string, got: unknown): DeployError {
  return new DeployError("invalid_request", `${at} ${rule}, got ${JSON.stringify(got ?? null)}`);
}
