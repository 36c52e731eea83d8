import { limits } from "@celld/queue-cell/limits";
import { apiLimits } from "./api-limits.ts";
import type { SubscriptionRow } from "./catalog.ts";
import { eventsFromEnvelope, eventsToMessages } from "./cloudevents.ts";
import { type EventEnvelope } from "../wire/event-envelope.ts";
import { cloudEventsOf } from "./cloudevents-http.ts";
import { ApiError } from "../wire/api-error.ts";
import { checkArray, readObject, requiredMember } from "./fields.ts";
import { checkSegment, childName, resolveQueueRef, subscriptionIdFor } from "./names.ts";
import { pageTokenAfter, readPage } from "./paging.ts";
import type { Reply, Route, RouteContext } from "./router.ts";
import { publish, readFilter } from "./subscriptions.ts";
import { formatMs } from "../wire/timestamps.ts";

/** The subscriptions collection, and publishing an event to an environment. */
const env = "/v1/orgs/{org}/projects/{project}/envs/{env}";
const collection = `${env}/subscriptions`;
const item = `${collection}/{subscription}`;

export const subscriptionRoutes: Route[] = [
  { method: "POST", path: collection, scope: "events:write", body: "control", handle: createSubscription },
  { method: "GET", path: collection, scope: "events:read", body: "none", query: ["page_size", "page_token"], largeAnswer: "withdrawable", handle: listSubscriptions },
  { method: "GET", path: item, scope: "events:read", body: "none", handle: getSubscription },
  { method: "PATCH", path: item, scope: "events:write", body: "control", handle: updateSubscription },
  { method: "DELETE", path: item, scope: "events:write", body: "none", handle: deleteSubscription },
  { method: "POST", path: `${env}/events:publish`, scope: "events:publish", body: "send", largeAnswer: "committed", handle: publishEvents },
];

const createFields: ReadonlySet<string> = new Set(["name", "queue", "filter"]);
const updateFields: ReadonlySet<string> = new Set(["queue", "filter"]);
const publishFields: ReadonlySet<string> = new Set(["events"]);

async function createSubscription(ctx: RouteContext): Promise<Reply> {
  const body = readObject(ctx.body, "", createFields);
  const name = subscriptionRef(ctx.env, body["name"]);
  const queue = targetQueue(ctx, body["queue"]);
  const filter = readFilter(body["filter"], "filter");
  const now = ctx.deps.clock.now();
  const row: SubscriptionRow = {
    name,
    env: ctx.env,
    subscription: name.slice(name.lastIndexOf("/") + 1),
    subscriptionId: subscriptionIdFor(ctx.deps.ids, now),
    queue,
    ...filter,
    createMs: now,
    updateMs: now,
  };
  const outcome = ctx.deps.catalog.insertSubscription(row, apiLimits.subscriptionsPerEnvMax);
  if (outcome === "exists") throw new ApiError("already_exists", `subscription ${name} already exists`, { field: "name" });
  if (outcome === "full") {
    throw new ApiError("out_of_range", `${ctx.env} already has ${apiLimits.subscriptionsPerEnvMax} subscriptions`, {
      field: "name",
      bound: `at most ${apiLimits.subscriptionsPerEnvMax} subscriptions per environment`,
    });
  }
  return { status: 201, json: subscriptionJson(row) };
}

async function listSubscriptions(ctx: RouteContext): Promise<Reply> {
  const page = readPage(ctx.query, apiLimits.pageSizeDefault, apiLimits.pageSizeMax);
  const rows = ctx.deps.catalog.listSubscriptions(ctx.env, page.after, page.size + 1);
  const shown = rows.slice(0, page.size);
  const json: Record<string, unknown> = { subscriptions: shown.map(subscriptionJson) };
  if (rows.length > page.size) json["next_page_token"] = pageTokenAfter(shown[shown.length - 1]!.subscription);
  return { json };
}

async function getSubscription(ctx: RouteContext): Promise<Reply> {
  return { json: subscriptionJson(requireSubscription(ctx)) };
}

async function updateSubscription(ctx: RouteContext): Promise<Reply> {
  const row = requireSubscription(ctx);
  const body = readObject(ctx.body, "", updateFields);
  const updated: SubscriptionRow = {
    ...row,
    queue: body["queue"] === undefined ? row.queue : targetQueue(ctx, body["queue"]),
    ...(body["filter"] === undefined ? {} : readFilter(body["filter"], "filter")),
    updateMs: ctx.deps.clock.now(),
  };
  ctx.deps.catalog.updateSubscription(updated);
  return { json: subscriptionJson(updated) };
}

async function deleteSubscription(ctx: RouteContext): Promise<Reply> {
  const row = requireSubscription(ctx);
  ctx.deps.catalog.deleteSubscription(row.name);
  return { json: {} };
}

async function publishEvents(ctx: RouteContext): Promise<Reply> {
  const { events, field } = ctx.requestFormat === "json" ? { events: publishedEvents(ctx), field: "events" } : cloudEventsOf(ctx);
  const messages = eventsToMessages(events, field);
  const deliveries = await publish(ctx.deps.catalog, ctx.deps.directory, ctx.env, events, messages);
  return {
    json: {
      events: deliveries.map((list) => ({ deliveries: list.map((d) => ({ queue: d.queue, message_id: d.messageId })) })),
    },
  };
}

function publishedEvents(ctx: RouteContext): EventEnvelope[] {
  const body = readObject(ctx.body, "", publishFields);
  const eventsBound = `1 to ${limits.batchMessagesMax} events`;
  const list = checkArray("events", requiredMember(body, "events", "", eventsBound), 1, limits.batchMessagesMax, "events");
  return eventsFromEnvelope(list, ctx.bodyText);
}

function subscriptionRef(envName: string, value: unknown): string {
  if (value === undefined) {
    throw new ApiError("invalid_argument", "name is required: the new subscription's id, or its full name", {
      field: "name",
      bound: "a subscription id, or orgs/{org}/projects/{project}/envs/{env}/subscriptions/{subscription}",
    });
  }
  const prefix = `${envName}/subscriptions/`;
  const id = typeof value === "string" && value.startsWith(prefix) ? value.slice(prefix.length) : value;
  return childName(envName, "subscriptions", checkSegment("name", id));
}

function targetQueue(ctx: RouteContext, value: unknown): string {
  if (value === undefined) {
    throw new ApiError("invalid_argument", "queue is required", { field: "queue", bound: "an existing queue of the same environment" });
  }
  const queue = resolveQueueRef(ctx.env, "queue", value);
  if (ctx.deps.directory.find(queue) === undefined) {
    throw new ApiError("invalid_argument", `queue names ${queue}, which does not exist; create it first`, {
      field: "queue",
      bound: "an existing queue of the same environment",
    });
  }
  return queue;
}

function requireSubscription(ctx: RouteContext): SubscriptionRow {
  const name = childName(ctx.env, "subscriptions", checkSegment("subscription", ctx.params["subscription"]));
  const row = ctx.deps.catalog.getSubscription(name);
  if (row === undefined) throw new ApiError("not_found", `subscription ${name} does not exist`);
  return row;
}

function subscriptionJson(row: SubscriptionRow): Record<string, unknown> {
  return {
    name: row.name,
    id: row.subscriptionId,
    queue: row.queue,
    filter: { types: row.types, sources: row.sources },
    create_time: formatMs(row.createMs),
    update_time: formatMs(row.updateMs),
  };
}
