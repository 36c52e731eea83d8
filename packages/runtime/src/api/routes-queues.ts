import type { CellCounts } from "@celld/queue-cell";
import { limits } from "@celld/queue-cell/limits";
import { apiLimits } from "./api-limits.ts";
import { ApiError } from "./errors.ts";
import type { ApiQueueSettings } from "./catalog.ts";
import { optionalInt, readObject, requiredMember, type JsonObject } from "./fields.ts";
import { checkSegment, childName, resolveQueueRef } from "./names.ts";
import { pageTokenAfter, readPage } from "./paging.ts";
import type { QueueView } from "./queue-directory.ts";
import type { Route, RouteContext } from "./router.ts";
import { formatMs } from "../wire/timestamps.ts";

/** The queues collection: create, get (with counts), list, update, delete. */
const collection = "/v1/orgs/{org}/projects/{project}/envs/{env}/queues";
const item = `${collection}/{queue}`;

const settingFields = ["visibility_timeout", "max_deliveries", "delivery_delay", "dead_letter_queue", "retention", "delivery_paused"] as const;
const createFields: ReadonlySet<string> = new Set(["name", ...settingFields]);
const updateFields: ReadonlySet<string> = new Set(settingFields);
/** `dead_letter_queue: null` sends dead letters to the queue's own set; any other null is "not given". */
const nullMeans: ReadonlySet<string> = new Set(["dead_letter_queue"]);

export const queueRoutes: Route[] = [
  { method: "POST", path: collection, scope: "events:write", body: "control", handle: createQueue },
  { method: "GET", path: collection, scope: "events:read", body: "none", query: ["page_size", "page_token"], handle: listQueues },
  { method: "GET", path: item, scope: "events:read", body: "none", handle: getQueue },
  { method: "PATCH", path: item, scope: "events:write", body: "control", handle: updateQueue },
  { method: "DELETE", path: item, scope: "events:write", body: "none", handle: deleteQueue },
];

/** The queue a path names; its segment is checked here, after the key has been. */
export function queueNameOf(ctx: RouteContext): string {
  return childName(ctx.env, "queues", checkSegment("queue", ctx.params["queue"]));
}

async function createQueue(ctx: RouteContext) {
  const body = readObject(ctx.body, "", createFields, nullMeans);
  const ref = requiredMember(
    body,
    "name",
    "",
    "a queue id, or orgs/{org}/projects/{project}/envs/{env}/queues/{queue}",
    ": the new queue's id, or its full name",
  );
  const name = resolveQueueRef(ctx.env, "name", ref);
  const queue = name.slice(name.lastIndexOf("/") + 1);
  const settings: ApiQueueSettings = {
    visibilityTimeout: limits.visibilityTimeoutSecondsDefault,
    maxDeliveries: limits.maxDeliveriesDefault,
    deliveryDelay: 0,
    deadLetterQueue: null,
    ...readSettings(ctx, body),
  };
  const row = await ctx.deps.directory.create(ctx.env, queue, settings);
  return { status: 201, json: await queueWithCounts(ctx, row.name) };
}

async function listQueues(ctx: RouteContext) {
  const page = readPage(ctx.query, apiLimits.pageSizeDefault, apiLimits.pageSizeMax);
  const rows = ctx.deps.directory.list(ctx.env, page.after, page.size + 1);
  const shown = rows.slice(0, page.size);
  const { directory } = ctx.deps;
  const queues = await Promise.all(
    shown.map(async (row) =>
      row.settings !== null
        ? queueJson(directory.view(row))
        : // A Workers queue's settings are in its cell.
          directory.withCell(row.name, async (cell) => queueJson(directory.view(row, cell))),
    ),
  );
  const json: Record<string, unknown> = { queues };
  if (rows.length > page.size) json["next_page_token"] = pageTokenAfter(shown[shown.length - 1]!.queue);
  return { json };
}

async function getQueue(ctx: RouteContext) {
  return { json: await queueWithCounts(ctx, queueNameOf(ctx)) };
}

async function updateQueue(ctx: RouteContext) {
  const name = queueNameOf(ctx);
  const body = readObject(ctx.body, "", updateFields, nullMeans);
  const { retentionSeconds, deliveryPaused, ...rest } = readSettings(ctx, body);
  // Retention and pause are any queue's to change, a Workers queue's too (setDelivery); the rest
  // of a Workers queue's settings are its config's.
  if (Object.values(rest).some((v) => v !== undefined) || (retentionSeconds === undefined && deliveryPaused === undefined)) {
    await ctx.deps.directory.update(name, rest);
  }
  if (retentionSeconds !== undefined || deliveryPaused !== undefined) {
    await ctx.deps.directory.setDelivery(name, { retentionSeconds, deliveryPaused });
  }
  return { json: await queueWithCounts(ctx, name) };
}

async function deleteQueue(ctx: RouteContext) {
  await ctx.deps.directory.remove(queueNameOf(ctx));
  return { json: {} };
}

function readSettings(ctx: RouteContext, body: JsonObject): Partial<ApiQueueSettings> {
  const settings: Partial<ApiQueueSettings> = {};
  const visibility = optionalInt(
    body,
    "visibility_timeout",
    "",
    limits.visibilityTimeoutSecondsMin,
    limits.visibilityTimeoutSecondsMax,
    "seconds",
  );
  if (visibility !== undefined) settings.visibilityTimeout = visibility;
  const maxDeliveries = optionalInt(body, "max_deliveries", "", limits.maxDeliveriesMin, limits.maxDeliveriesMax);
  if (maxDeliveries !== undefined) settings.maxDeliveries = maxDeliveries;
  const delay = optionalInt(body, "delivery_delay", "", 0, limits.delaySecondsMax, "seconds");
  if (delay !== undefined) settings.deliveryDelay = delay;
  const retention = optionalInt(body, "retention", "", limits.retentionSecondsMin, limits.retentionSecondsMax, "seconds");
  if (retention !== undefined) settings.retentionSeconds = retention;
  const paused = body["delivery_paused"];
  if (paused !== undefined && paused !== null) {
    if (typeof paused !== "boolean") {
      throw new ApiError("invalid_argument", `delivery_paused must be true or false, got ${JSON.stringify(paused)}`, {
        field: "delivery_paused",
        bound: "true or false",
      });
    }
    settings.deliveryPaused = paused;
  }
  const dlq = body["dead_letter_queue"];
  if (dlq === null) settings.deadLetterQueue = null;
  else if (dlq !== undefined) settings.deadLetterQueue = resolveQueueRef(ctx.env, "dead_letter_queue", dlq);
  return settings;
}

async function queueWithCounts(ctx: RouteContext, name: string): Promise<Record<string, unknown>> {
  return ctx.deps.directory.withCell(name, async (cell, row) => {
    const counts = await cell.counts();
    return { ...queueJson(ctx.deps.directory.view(row, cell)), counts: countsJson(counts) };
  });
}

export function queueJson(view: QueueView): Record<string, unknown> {
  const { row, settings } = view;
  return {
    name: row.name,
    id: row.queueId,
    origin: row.origin,
    visibility_timeout: settings.visibilityTimeout,
    max_deliveries: settings.maxDeliveries,
    delivery_delay: settings.deliveryDelay,
    dead_letter_queue: settings.deadLetterQueue,
    dead_letter_policy: view.deadLetterPolicy,
    retention: settings.retentionSeconds,
    delivery_paused: settings.deliveryPaused,
    create_time: formatMs(row.createMs),
    update_time: formatMs(row.updateMs),
  };
}

function countsJson(counts: CellCounts): Record<string, unknown> {
  return {
    ready: counts.ready,
    delayed: counts.delayed,
    leased: counts.leased,
    dead: counts.dead,
    moving_to_dead_letter_queue: counts.movingToDeadLetterQueue,
    backlog_bytes: counts.backlogBytes,
    oldest_message_time: counts.oldestMessageAt === null ? null : formatMs(counts.oldestMessageAt),
  };
}

