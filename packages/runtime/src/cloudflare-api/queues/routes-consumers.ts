import { randomBytes } from "node:crypto";
import type { Cell } from "@celld/queue-cell";
import type { ConsumerRow, QueueRow } from "../../api/catalog.ts";
import { childName } from "../../api/names.ts";
import { CloudflareError } from "../cloudflare-errors.ts";
import type { CloudflareContext, CloudflareReply, CloudflareRoute } from "../route.ts";
import { readConsumerSettings } from "./consumer-settings.ts";
import { consumerJson, consumersOf, type QueueConsumer } from "./queue-consumers.ts";
import { queueCodes, queueOf } from "./queue-lookup.ts";
import { objectBody } from "./routes-queues.ts";
import { addedConsumerOf, tellAddedConsumers } from "./added-consumers-of.ts";

const collection = "/accounts/{account}/queues/{queue}/consumers";
const item = `${collection}/{consumer}`;
const codes = { not_found: queueCodes.queueNotFound, invalid_argument: queueCodes.consumerSettingsInvalid } as const;

/** Cloudflare's code for a Worker that does not exist (workers.api.error.script_not_found). */
const workerNotFound = 10007;

/** Cloudflare's code for a second consumer on a queue (one consumer per queue, Worker or pull). */
const consumerAlreadyExists = 11004;

/** `wrangler queues consumer add|remove`, `consumer http add|remove`, deploy's consumer calls, the SDK's. */
export const cloudflareConsumerRoutes: CloudflareRoute[] = [
  { method: "GET", path: collection, scope: "events:read", body: "none", codes, handle: listConsumers },
  { method: "POST", path: collection, scope: "events:write", body: "json", codes, handle: addConsumer },
  { method: "GET", path: item, scope: "events:read", body: "none", codes, handle: getConsumer },
  { method: "PUT", path: item, scope: "events:write", body: "json", codes, handle: updateConsumer },
  { method: "DELETE", path: item, scope: "events:write", body: "none", codes, handle: removeConsumer },
];

async function listConsumers(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  return { result: consumersOf(ctx, row).map((c) => consumerJson(row, c)) };
}

async function getConsumer(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  return { result: consumerJson(row, consumerOf(ctx, row)) };
}

/**
 * One consumer per queue, as Cloudflare documents: a Worker or an HTTP pull consumer. Its
 * max_retries, dead_letter_queue and (pull) visibility_timeout_ms become the queue's cell settings.
 */
async function addConsumer(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const body = objectBody(ctx.body);
  const type = body["type"] ?? "worker";
  if (type !== "worker" && type !== "http_pull") {
    throw new CloudflareError(400, queueCodes.consumerSettingsInvalid, `type must be "worker" or "http_pull", got ${JSON.stringify(type)}`);
  }
  const script = type === "worker" ? scriptName(body["script_name"] ?? body["script"]) : null;
  // As Cloudflare: a Worker consumer names a Worker that exists, here one the host runs.
  if (script !== null && ctx.deps.addedConsumers?.runs(script) === false) {
    throw new CloudflareError(
      404,
      workerNotFound,
      `Worker ${script} does not exist on this celld (no running deployment has it); deploy or start it, then add its consumer`,
    );
  }
  const existing = consumersOf(ctx, row);
  if (existing.length > 0) {
    const what = existing[0]!.type === "worker" ? `the Worker ${existing[0]!.script}` : "an HTTP pull consumer";
    throw new CloudflareError(409, consumerAlreadyExists, `queue ${row.queue} already has a consumer (${what}); a queue has one consumer`);
  }
  const consumer: ConsumerRow = {
    consumerId: randomBytes(16).toString("hex"),
    queue: row.name,
    type,
    script,
    settings: readConsumerSettings(type, body["settings"]),
    deadLetterQueue: deadLetterQueueOf(ctx, row, body["dead_letter_queue"]),
    createMs: ctx.deps.clock.now(),
  };
  await applyToQueue(ctx, row, consumer);
  ctx.deps.catalog.insertConsumer(consumer);
  await tellAddedConsumers(ctx.deps);
  return { result: consumerJson(row, consumersOf(ctx, row).find((c) => c.consumerId === consumer.consumerId)!) };
}

async function updateConsumer(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const current = apiOwned(consumerOf(ctx, row));
  const body = objectBody(ctx.body);
  const updated: ConsumerRow = {
    consumerId: current.consumerId,
    queue: row.name,
    type: current.type,
    script: current.script ?? null,
    settings: readConsumerSettings(current.type, body["settings"], current.settings),
    deadLetterQueue:
      body["dead_letter_queue"] === undefined
        ? current.deadLetterQueue === undefined
          ? null
          : childName(row.env, "queues", current.deadLetterQueue)
        : deadLetterQueueOf(ctx, row, body["dead_letter_queue"]),
    createMs: current.createMs,
  };
  await applyToQueue(ctx, row, updated);
  ctx.deps.catalog.updateConsumer(updated);
  await tellAddedConsumers(ctx.deps);
  return { result: consumerJson(row, consumerOf(ctx, row)) };
}

async function removeConsumer(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const consumer = apiOwned(consumerOf(ctx, row));
  ctx.deps.catalog.deleteConsumer(row.name, consumer.consumerId);
  // Answered once its batches in flight have finished (or been handed back): it runs no more.
  await tellAddedConsumers(ctx.deps);
  // A Workers queue goes back to the policy of a queue with no consumer, which a restart gives it.
  if (row.settings === null) await ctx.deps.directory.withCell(row.name, (cell) => cell.configure({ deadLetter: { kind: "set" } }));
  return { result: {} };
}

function consumerOf(ctx: CloudflareContext, row: QueueRow): QueueConsumer {
  const id = ctx.params["consumer"]!;
  const found = consumersOf(ctx, row).find((c) => c.consumerId === id);
  if (found === undefined) throw new CloudflareError(404, queueCodes.queueNotFound, `queue ${row.queue} has no consumer ${id}`);
  return found;
}

function apiOwned(consumer: QueueConsumer): QueueConsumer {
  if (consumer.origin === "config") {
    throw new CloudflareError(
      409,
      queueCodes.consumerSettingsInvalid,
      `this consumer is declared by the Workers config (queues.consumers of ${consumer.script ?? "a Worker"}); change or remove it there`,
    );
  }
  return consumer;
}

function scriptName(value: unknown): string {
  if (typeof value !== "string" || !/^[A-Za-z0-9_-]{1,63}$/.test(value)) {
    throw new CloudflareError(400, queueCodes.consumerSettingsInvalid, `script_name must name a Worker (letters, digits, _ and -), got ${JSON.stringify(value)}`);
  }
  return value;
}

function deadLetterQueueOf(ctx: CloudflareContext, row: QueueRow, value: unknown): string | null {
  if (value === undefined || value === null || value === "") return null;
  if (typeof value !== "string") throw new CloudflareError(400, queueCodes.consumerSettingsInvalid, "dead_letter_queue must be a queue name");
  const name = childName(row.env, "queues", value);
  if (ctx.deps.directory.find(name) === undefined) {
    throw new CloudflareError(400, queueCodes.consumerSettingsInvalid, `dead_letter_queue ${value} does not exist; create it first`);
  }
  return name;
}

/**
 * The consumer's delivery rules are the cell's: max_retries + 1 deliveries, then its dead-letter
 * queue; a pull consumer's visibility timeout is the default lease length (whole seconds, rounded up).
 * An API queue's settings are the catalog's; a Workers queue's cell is configured directly.
 */
async function applyToQueue(ctx: CloudflareContext, row: QueueRow, consumer: ConsumerRow): Promise<void> {
  const { directory } = ctx.deps;
  const { policy } = addedConsumerOf(consumer, (name) => directory.cellNameOf(name));
  if (row.settings !== null) {
    await directory.update(row.name, {
      maxDeliveries: policy.maxDeliveries,
      deadLetterQueue: consumer.deadLetterQueue,
      visibilityTimeout: policy.visibilityTimeoutSeconds,
    });
    return;
  }
  // The same policy a restart gives the cell (QueuesPlugin.prepare), so the API's choice survives it.
  await directory.withCell(row.name, (cell: Cell) => cell.configure(policy));
}
