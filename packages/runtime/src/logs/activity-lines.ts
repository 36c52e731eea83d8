import { STATUS_CODES } from "node:http";
import type { BatchReport } from "@celld/bindings";

/** One HTTP request as `celld dev --log-requests` prints it, as `wrangler dev` does: `GET /jobs 202 Accepted (3ms)`. */
export interface RequestRecord {
  method: string;
  /** The path and query as the client sent them. */
  url: string;
  status: number;
  durationMs: number;
  /** The Worker that answered, when a Worker did. */
  worker?: string;
  /** Which of celld's ports took it: the Workers' (`--port`) or the API's (`--api-port`). */
  port?: "workers" | "api";
}

export function requestLine(r: RequestRecord): string {
  const text = STATUS_CODES[r.status];
  return `${r.method} ${r.url} ${r.status}${text === undefined ? "" : ` ${text}`} (${Math.round(r.durationMs)}ms)`;
}

/**
 * One consumer batch: `QUEUE jobs 10/10 (9ms)`, the messages acked of the batch's, then what
 * else became of the rest (`2 retried`, `1 dead-lettered`) and an outcome other than ok.
 */
export function batchLine(r: BatchReport): string {
  const rest: string[] = [];
  if (r.retried > 0) rest.push(`${r.retried} retried`);
  if (r.deadLettered > 0) rest.push(`${r.deadLettered} dead-lettered`);
  if (r.outcome !== "ok") rest.push(`outcome ${r.outcome}`);
  return `QUEUE ${r.queue} ${r.acked}/${r.size} (${Math.round(r.durationMs)}ms)${rest.length === 0 ? "" : ` ${rest.join(", ")}`}`;
}

/** The fields a JSON line carries for a batch. */
export function batchFields(r: BatchReport): Record<string, unknown> {
  return {
    queue: r.queue,
    size: r.size,
    acked: r.acked,
    retried: r.retried,
    dead_lettered: r.deadLettered,
    outcome: r.outcome,
    duration_ms: Math.round(r.durationMs),
  };
}

export function requestFields(r: RequestRecord): Record<string, unknown> {
  return {
    ...(r.worker === undefined ? {} : { worker: r.worker }),
    ...(r.port === undefined ? {} : { port: r.port }),
    method: r.method,
    url: r.url,
    status: r.status,
    duration_ms: Math.round(r.durationMs),
  };
}
