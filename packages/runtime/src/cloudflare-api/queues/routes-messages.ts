import { limits, type BacklogMetrics, type LeasedMessage, type NackRef, type OutgoingMessage } from "@celld/queue-cell";
import { leaseForClient, releaseUndelivered } from "../../api/lease-handoff.ts";
import { apiLimits } from "../../api/api-limits.ts";
import { CloudflareError, CloudflareNumberError } from "../cloudflare-errors.ts";
import type { CloudflareMessage } from "../envelope.ts";
import type { CloudflareContext, CloudflareReply, CloudflareRoute } from "../route.ts";
import { leaseIdOf, readLeaseId } from "./lease-id.ts";
import { pulledBody, pushedMessage } from "./message-bodies.ts";
import { pullConsumerOf } from "./queue-consumers.ts";
import { queueCodes, queueOf, queueRouteCodes } from "./queue-lookup.ts";
import { objectBody } from "./routes-queues.ts";

const messages = "/accounts/{account}/queues/{queue}/messages";
const codes = queueRouteCodes;

/** Publishing over HTTP and HTTP pull consumers: the SDK's queues.messages.push / bulkPush / pull / ack. */
export const cloudflareMessageRoutes: CloudflareRoute[] = [
  { method: "POST", path: messages, scope: "events:publish", body: "json", bodyBytesMax: apiLimits.sendBodyBytesMax, codes, handle: push },
  { method: "POST", path: `${messages}/batch`, scope: "events:publish", body: "json", bodyBytesMax: apiLimits.sendBodyBytesMax, codes, handle: pushBatch },
  { method: "POST", path: `${messages}/pull`, scope: "events:write", body: "json", codes, handle: pull },
  { method: "POST", path: `${messages}/ack`, scope: "events:write", body: "json", codes, handle: ack },
];

/** Cloudflare's default pull batch when neither the request nor the pull consumer names one. */
const pullBatchDefault = 5;
const pushFields = new Set(["body", "content_type", "delay_seconds"]);

async function push(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const message = outgoing(objectBody(ctx.body), "message", pushFields);
  const result = await ctx.deps.directory.withCell(row.name, (cell) => cell.send([message]));
  return { result: { metadata: { metrics: metricsJson(result.metrics) } } };
}

async function pushBatch(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const body = objectBody(ctx.body);
  only(body, new Set(["messages", "delay_seconds"]), "");
  const list = body["messages"];
  if (!Array.isArray(list) || list.length === 0 || list.length > limits.batchMessagesMax) {
    throw new CloudflareError(400, queueCodes.batchCount, `messages must be an array of 1 to ${limits.batchMessagesMax} messages`);
  }
  const batchDelay = delayOf(body["delay_seconds"], "delay_seconds", queueCodes.batchDelayInvalid);
  const out = list.map((item, i) => outgoing(objectBody(item), `messages[${i}]`, pushFields));
  const result = await ctx.deps.directory.withCell(row.name, (cell) => cell.send(out, batchDelay === undefined ? {} : { delaySeconds: batchDelay }));
  return { result: { metadata: { metrics: metricsJson(result.metrics) } } };
}

function outgoing(item: Record<string, unknown>, field: string, fields: ReadonlySet<string>): OutgoingMessage {
  only(item, fields, `${field}.`);
  const message: OutgoingMessage = pushedMessage(item["body"], item["content_type"], field);
  const delay = delayOf(item["delay_seconds"], `${field}.delay_seconds`, queueCodes.messageMetadataInvalid);
  if (delay !== undefined) message.delaySeconds = delay;
  return message;
}

/**
 * A pull is a lease: `lease_id` carries the lease generation. Cloudflare only short-polls; celld
 * also waits up to `wait_seconds` (its extension, 0 unless asked) for a first message.
 */
async function pull(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const body = objectBody(ctx.body);
  only(body, new Set(["batch_size", "visibility_timeout_ms", "wait_seconds"]), "");
  const consumer = pullConsumerOf(ctx, row);
  const max = intIn(body["batch_size"], "batch_size", 1, limits.leaseMessagesMax) ?? consumer?.settings["batch_size"] ?? pullBatchDefault;
  const visibilityMs = intIn(body["visibility_timeout_ms"], "visibility_timeout_ms", 1, limits.visibilityTimeoutSecondsMax * 1000);
  const wait = intIn(body["wait_seconds"], "wait_seconds", 0, limits.leaseWaitSecondsMax) ?? 0;
  return ctx.deps.directory.withCell(row.name, async (cell, _row, queueGone) => {
    // Current for a cell on a worker thread too (see the native API's lease).
    if (cell.queueConfig.deliveryPaused) {
      // Cloudflare's answer to a pull from a paused queue: 409, queue_delivery_paused.
      throw new CloudflareError(409, queueCodes.bodyInvalid, `queue_delivery_paused: delivery of queue ${row.queue} is paused (wrangler queues resume-delivery ${row.queue})`);
    }
    const leased = await leaseForClient(
      cell,
      {
        max,
        // The cell leases in whole seconds: a part second is rounded up, never down.
        ...(visibilityMs === undefined ? {} : { visibilityTimeoutSeconds: Math.ceil(visibilityMs / 1000) }),
        waitSeconds: wait,
      },
      ctx.clientGone,
      [ctx.stopping, queueGone],
    );
    const metrics = await cell.backlogMetrics();
    return {
      result: {
        message_backlog_count: metrics.backlogCount,
        messages: leased.map((m) => pulledJson(row.queueId, m)),
        metadata: { metrics: metricsJson(metrics) },
      },
      afterWrite: async (delivered: boolean) => {
        if (!delivered) await releaseUndelivered(cell, leased);
      },
    };
  });
}

function pulledJson(queueId: string, m: LeasedMessage): Record<string, unknown> {
  const { body, contentType } = pulledBody(m);
  return {
    id: m.id,
    timestamp_ms: m.sentAt,
    attempts: m.deliveries,
    body,
    lease_id: leaseIdOf({ queueId, messageId: m.id, leaseGeneration: m.leaseGeneration }),
    metadata: { "CF-Content-Type": contentType },
  };
}

/**
 * Acks and retries, fenced: a lease that is no longer current (its visibility timeout passed and
 * the message was pulled again, or it was settled already) is not applied. Cloudflare applies such
 * a late ack silently; celld leaves it out of the counts and says so in `warnings` and `messages`.
 */
async function ack(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const body = objectBody(ctx.body);
  only(body, new Set(["acks", "retries"]), "");
  const acks = listOf(body["acks"], "acks").map((item, i) => {
    const ref = objectBody(item);
    only(ref, new Set(["lease_id"]), `acks[${i}].`);
    const lease = readLeaseId(ref["lease_id"], row.queueId, `acks[${i}].lease_id`);
    return { id: lease.messageId, leaseGeneration: lease.leaseGeneration };
  });
  const retryDelayDefault = pullConsumerOf(ctx, row)?.settings["retry_delay"];
  const retries: NackRef[] = listOf(body["retries"], "retries").map((item, i) => {
    const ref = objectBody(item);
    only(ref, new Set(["lease_id", "delay_seconds"]), `retries[${i}].`);
    const lease = readLeaseId(ref["lease_id"], row.queueId, `retries[${i}].lease_id`);
    const delay = delayOf(ref["delay_seconds"], `retries[${i}].delay_seconds`, queueCodes.messageMetadataInvalid) ?? retryDelayDefault;
    return { id: lease.messageId, leaseGeneration: lease.leaseGeneration, ...(delay === undefined || delay === 0 ? {} : { delaySeconds: delay }) };
  });
  const result = await ctx.deps.directory.withCell(row.name, (cell) => cell.settle({ acks, nacks: retries }));
  const warnings = result.staleLeases.map(
    (ref) => `lease of message ${ref.id} (generation ${ref.leaseGeneration}) is no longer current: not applied`,
  );
  const notes: CloudflareMessage[] = warnings.map((message) => ({ code: staleLeaseNote, message }));
  return {
    result: { ackCount: result.acked, retryCount: result.retried + result.deadLettered, warnings },
    messages: notes,
  };
}

/** celld's own note code for a stale lease in `messages` (Cloudflare has none: it applies them). */
const staleLeaseNote = 10290;

function listOf(value: unknown, field: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > limits.leaseMessagesMax) {
    throw new CloudflareError(400, queueCodes.bodyInvalid, `${field} must be an array of at most ${limits.leaseMessagesMax} leases`);
  }
  return value;
}

function metricsJson(metrics: BacklogMetrics): Record<string, number> {
  return {
    backlog_count: metrics.backlogCount,
    backlog_bytes: metrics.backlogBytes,
    oldest_message_timestamp_ms: metrics.oldestMessageTimestamp,
  };
}

function delayOf(value: unknown, field: string, code: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > limits.delaySecondsMax) {
    throw new CloudflareNumberError(400, code, field, `${field} must be an integer from 0 to ${limits.delaySecondsMax} seconds`, value);
  }
  return value;
}

function intIn(value: unknown, field: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new CloudflareNumberError(400, queueCodes.bodyInvalid, field, `${field} must be an integer from ${min} to ${max}`, value);
  }
  return value;
}

function only(object: Record<string, unknown>, fields: ReadonlySet<string>, path: string): void {
  for (const name of Object.keys(object)) {
    if (!fields.has(name)) throw new CloudflareError(400, queueCodes.bodyInvalid, `${path}${name} is not a field of this call; its fields are ${[...fields].join(", ")}`);
  }
}
