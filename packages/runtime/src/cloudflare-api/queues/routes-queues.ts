import { limits } from "@celld/queue-cell";
import type { ApiQueueSettings } from "../../api/catalog.ts";
import { CloudflareError } from "../cloudflare-errors.ts";
import { cloudflareLimits } from "../limits.ts";
import { pageOf, readOffsetPage } from "../paging.ts";
import type { CloudflareContext, CloudflareReply, CloudflareRoute } from "../route.ts";
import { queueJson } from "./queue-json.ts";
import { queueCodes, queueOf, queueRouteCodes } from "./queue-lookup.ts";
import { applyQueueSettings, readQueueSettings } from "./queue-settings.ts";

const collection = "/accounts/{account}/queues";
const item = `${collection}/{queue}`;
const codes = queueRouteCodes;

/** The queues collection, as `wrangler queues create|list|info|update|delete` and the SDK call it. */
export const cloudflareQueueRoutes: CloudflareRoute[] = [
  { method: "GET", path: collection, scope: "events:read", body: "none", codes, handle: listQueues },
  { method: "POST", path: collection, scope: "events:write", body: "json", codes, handle: createQueue },
  { method: "GET", path: item, scope: "events:read", body: "none", codes, handle: getQueue },
  { method: "PATCH", path: item, scope: "events:write", body: "json", codes, handle: updateQueue },
  // The SDK's queues.update is a PUT of the same body.
  { method: "PUT", path: item, scope: "events:write", body: "json", codes, handle: updateQueue },
  { method: "DELETE", path: item, scope: "events:write", body: "none", codes, handle: deleteQueue },
  { method: "GET", path: `${item}/metrics`, scope: "events:read", body: "none", codes, handle: queueMetrics },
];

/** wrangler finds a queue by `?name=` (repeatable) and takes element 0, so the filter must work. */
async function listQueues(ctx: CloudflareContext): Promise<CloudflareReply> {
  const page = readOffsetPage(ctx.query, cloudflareLimits.perPageDefault, cloudflareLimits.perPageMax);
  const names = new Set(ctx.query.getAll("name"));
  const { directory } = ctx.deps;
  let rows = directory.list(ctx.env, "", Number.MAX_SAFE_INTEGER);
  if (names.size > 0) rows = rows.filter((row) => names.has(row.queue));
  const { result, resultInfo } = pageOf(rows, page);
  const queues = await Promise.all(result.map((row) => directory.withCell(row.name, async (cell) => queueJson(ctx, row, cell))));
  return { result: queues, resultInfo };
}

async function createQueue(ctx: CloudflareContext): Promise<CloudflareReply> {
  const body = objectBody(ctx.body);
  const queue = queueName(body["queue_name"]);
  const wanted = readQueueSettings(body["settings"]);
  const settings: ApiQueueSettings = {
    visibilityTimeout: limits.visibilityTimeoutSecondsDefault,
    // Cloudflare's consumer default (max_retries 3) until a consumer says otherwise.
    maxDeliveries: limits.maxRetriesDefault + 1,
    deliveryDelay: wanted.delivery_delay ?? 0,
    deadLetterQueue: null,
  };
  const row = await ctx.deps.directory.create(ctx.env, queue, settings);
  return ctx.deps.directory.withCell(row.name, async (cell, current) => {
    await applyQueueSettings(ctx, current, cell, { ...wanted, delivery_delay: undefined });
    return { result: queueJson(ctx, ctx.deps.directory.require(row.name), cell) };
  });
}

async function getQueue(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  return ctx.deps.directory.withCell(row.name, async (cell, current) => ({ result: queueJson(ctx, current, cell) }));
}

/** PATCH merges `settings` (pause and resume send only delivery_paused); a rename is refused. */
async function updateQueue(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const body = objectBody(ctx.body);
  const name = body["queue_name"];
  if (name !== undefined && name !== row.queue) {
    throw new CloudflareError(400, queueCodes.queueSettingsInvalid, `a queue cannot be renamed on celld (its messages live in a file named after it): queue_name must stay ${row.queue}`);
  }
  const wanted = readQueueSettings(body["settings"]);
  const { directory } = ctx.deps;
  await directory.withCell(row.name, (cell, current) => applyQueueSettings(ctx, current, cell, wanted));
  return directory.withCell(row.name, async (cell, current) => ({ result: queueJson(ctx, current, cell) }));
}

/** The SDK's queues.getMetrics: the backlog, from what has committed. */
async function queueMetrics(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const metrics = await ctx.deps.directory.withCell(row.name, (cell) => cell.backlogMetrics());
  return {
    result: {
      backlog_count: metrics.backlogCount,
      backlog_bytes: metrics.backlogBytes,
      oldest_message_timestamp_ms: metrics.oldestMessageTimestamp,
    },
  };
}

async function deleteQueue(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  await ctx.deps.directory.remove(row.name);
  return { result: {} };
}

export function objectBody(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new CloudflareError(400, queueCodes.bodyInvalid, "the request body must be a JSON object");
  }
  return body as Record<string, unknown>;
}

const queueNamePattern = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** Cloudflare's rule for a queue name (lowercase letters, digits, dashes; at most 63). */
function queueName(value: unknown): string {
  if (typeof value !== "string" || value.length > limits.queueNameCharsMax || !queueNamePattern.test(value)) {
    throw new CloudflareError(
      400,
      queueCodes.bodyInvalid,
      `queue_name must be 1 to ${limits.queueNameCharsMax} lowercase letters, digits and dashes, not starting or ending with a dash; got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

