import { createHash } from "node:crypto";
import type { ConsumerRow, QueueRow } from "../../api/catalog.ts";
import { shortId } from "../../api/names.ts";
import type { CloudflareContext } from "../route.ts";
import type { ConfigConsumer } from "../services.ts";

/** A queue's consumer as the API shows it: the config's or one added through the API. */
export interface QueueConsumer {
  consumerId: string;
  type: "worker" | "http_pull";
  script: string | undefined;
  settings: Record<string, number>;
  /** Short name. */
  deadLetterQueue: string | undefined;
  createMs: number;
  /** `config`: declared by the Workers config, which owns it. */
  origin: "config" | "api";
}

/** The config's consumers first (they are the ones running), then those the API added. */
export function consumersOf(ctx: CloudflareContext, row: QueueRow): QueueConsumer[] {
  const fromConfig = row.origin === "workers" ? (ctx.services.workersQueues?.consumers(row.queue) ?? []) : [];
  return [
    ...fromConfig.map((c) => configConsumer(row, c)),
    ...ctx.deps.catalog.consumersOf(row.name).map(apiConsumer),
  ];
}

/** The Workers that send to it: any queue of the Workers environment may be bound, one the API created too. */
export function producersOf(ctx: CloudflareContext, row: QueueRow): string[] {
  return row.env === ctx.deps.directory.workerEnv ? (ctx.services.workersQueues?.producers(row.queue) ?? []) : [];
}

/** The consumer that serves pulls: the first http_pull one. */
export function pullConsumerOf(ctx: CloudflareContext, row: QueueRow): QueueConsumer | undefined {
  return consumersOf(ctx, row).find((c) => c.type === "http_pull");
}

function configConsumer(row: QueueRow, c: ConfigConsumer): QueueConsumer {
  return {
    // Stable across restarts, so `wrangler queues consumer remove` can name it (and be refused).
    consumerId: createHash("sha256").update(`${row.name}\n${c.type}\n${c.script ?? ""}`).digest("hex").slice(0, 32),
    type: c.type,
    script: c.script,
    settings: c.settings,
    deadLetterQueue: c.deadLetterQueue,
    createMs: row.createMs,
    origin: "config",
  };
}

function apiConsumer(c: ConsumerRow): QueueConsumer {
  return {
    consumerId: c.consumerId,
    type: c.type,
    script: c.script ?? undefined,
    settings: c.settings,
    deadLetterQueue: c.deadLetterQueue === null ? undefined : shortId(c.deadLetterQueue),
    createMs: c.createMs,
    origin: "api",
  };
}

export function consumerJson(queue: QueueRow, c: QueueConsumer): Record<string, unknown> {
  const json: Record<string, unknown> = {
    consumer_id: c.consumerId,
    type: c.type,
    queue_id: queue.queueId,
    queue_name: queue.queue,
    created_on: new Date(c.createMs).toISOString(),
    settings: c.settings,
  };
  if (c.script !== undefined) {
    json["script"] = c.script;
    json["script_name"] = c.script;
  }
  if (c.deadLetterQueue !== undefined) json["dead_letter_queue"] = c.deadLetterQueue;
  return json;
}
