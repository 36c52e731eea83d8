import type { LeasedMessage, LeaseRef, NackRef, SettleResult } from "@celld/queue-cell";
import { limits } from "@celld/queue-cell/limits";
import { apiLimits } from "./api-limits.ts";
import { eventFromProto, eventFromStored, eventsFromEnvelope, eventsToMessages, eventToJsonText } from "./cloudevents.ts";
import { type EventEnvelope } from "../wire/event-envelope.ts";
import { cloudEventsOf } from "./cloudevents-http.ts";
import { ApiError } from "../wire/api-error.ts";
import { checkArray, checkInt, optionalInt, readObject, requiredMember } from "./fields.ts";
import { withMember } from "../wire/json-source.ts";
import { leaseForClient, releaseUndelivered } from "./lease-handoff.ts";
import { checkMessageId, messageIdBound } from "./names.ts";
import {
  encodeProto,
  envelopeToProto,
  int64ToNumber,
  type PbAckRequest,
  type PbLeaseRef,
  type PbLeaseRequest,
  type PbNackRequest,
  type PbSendRequest,
} from "../wire/proto-codec.ts";
import { queueNameOf } from "./routes-queues.ts";
import type { Reply, Route, RouteContext } from "./router.ts";
import { formatMs, msToInstant } from "../wire/timestamps.ts";

/** The message routes a worker calls in its loop; each speaks JSON and protobuf. */
const item = "/v1/orgs/{org}/projects/{project}/envs/{env}/queues/{queue}";

export const messageRoutes: Route[] = [
  { method: "POST", path: `${item}:send`, scope: "events:publish", body: "send", protobuf: "SendRequest", handle: send },
  { method: "POST", path: `${item}:lease`, scope: "events:write", body: "control", protobuf: "LeaseRequest", largeAnswer: "withdrawable", handle: lease },
  { method: "POST", path: `${item}:ack`, scope: "events:write", body: "control", protobuf: "AckRequest", handle: ack },
  { method: "POST", path: `${item}:nack`, scope: "events:write", body: "control", protobuf: "NackRequest", handle: nack },
];

const sendFields: ReadonlySet<string> = new Set(["events", "delay"]);
const leaseFields: ReadonlySet<string> = new Set(["max_messages", "visibility_timeout", "wait"]);
const ackFields: ReadonlySet<string> = new Set(["messages"]);
const nackFields: ReadonlySet<string> = new Set(["messages", "delay"]);
const ackRefFields: ReadonlySet<string> = new Set(["id", "lease_generation"]);
const nackRefFields: ReadonlySet<string> = new Set(["id", "lease_generation", "delay"]);
const leaseGenerationMax = Number.MAX_SAFE_INTEGER;
const eventsBound = `1 to ${limits.batchMessagesMax} events`;
const refsBound = `1 to ${limits.leaseMessagesMax} messages`;
const generationBound = `1 to ${leaseGenerationMax}`;
async function send(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const input = sendInput(ctx);
  const messages = eventsToMessages(input.events, input.field);
  const result = await ctx.deps.directory.withCell(name, (cell) => cell.send(messages, { delaySeconds: input.delay }));
  return ctx.responseFormat === "protobuf"
    ? { protobuf: encodeProto("SendResponse", { message_ids: result.ids }) }
    : { json: { message_ids: result.ids } };
}

interface SendInput {
  events: EventEnvelope[];
  delay: number | undefined;
  /** What errors name the events by (eventsToMessages). */
  field: string | null;
}

function sendInput(ctx: RouteContext): SendInput {
  if (ctx.requestFormat === "protobuf") return sendFromProto(ctx.body as PbSendRequest);
  if (ctx.requestFormat === "json") return sendFromJson(ctx.body, ctx.bodyText);
  // The binding has no delay of its own: the queue's delivery_delay applies.
  return { ...cloudEventsOf(ctx), delay: undefined };
}

/** `text` is the body's JSON text, for each event's data as written; without it data is written anew. */
export function sendFromJson(raw: unknown, text?: string): SendInput {
  const body = readObject(raw, "", sendFields);
  const events = checkArray("events", requiredMember(body, "events", "", eventsBound), 1, limits.batchMessagesMax, "events");
  return {
    events: eventsFromEnvelope(events, text),
    delay: optionalInt(body, "delay", "", 0, limits.delaySecondsMax, "seconds"),
    field: "events",
  };
}

export function sendFromProto(body: PbSendRequest): SendInput {
  const events = checkArray("events", body.events ?? [], 1, limits.batchMessagesMax, "events");
  return {
    events: (events as PbSendRequest["events"]).map((event, i) => eventFromProto(event, `events[${i}]`)),
    delay: nullable(body.delay, (v) => checkInt("delay", v, 0, limits.delaySecondsMax, "seconds")),
    field: "events",
  };
}

async function lease(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const input = ctx.requestFormat === "protobuf" ? leaseFromProto(ctx.body as PbLeaseRequest) : leaseFromJson(ctx.body);
  return ctx.deps.directory.withCell(name, async (cell, row, queueGone) => {
    // A cell on a worker thread: its mirror of queueConfig came with the answer of the configure
    // that paused it, so a pause this API (or any) has answered is seen here.
    if (cell.queueConfig.deliveryPaused) throw deliveryPaused(row.name);
    const messages = await leaseForClient(
      cell,
      { max: input.max, visibilityTimeoutSeconds: input.visibilityTimeout, waitSeconds: input.wait },
      ctx.clientGone,
      [ctx.stopping, queueGone],
    );
    const afterWrite = async (delivered: boolean): Promise<void> => {
      if (!delivered) await releaseUndelivered(cell, messages);
    };
    try {
      return { ...leaseAnswer(ctx, messages, `/${row.name}`), afterWrite };
    } catch (error) {
      // An answer that cannot be built reaches nobody: its messages must not wait out their lease.
      await releaseUndelivered(cell, messages);
      throw error;
    }
  });
}

function leaseAnswer(ctx: RouteContext, messages: readonly LeasedMessage[], source: string): Reply {
  const events = messages.map((m) => eventFromStored(m, source));
  if (ctx.responseFormat === "protobuf") {
    const out = messages.map((m, i) => ({
      id: m.id,
      lease_generation: m.leaseGeneration,
      delivery_count: m.deliveries,
      lease_expire_time: msToInstant(m.leaseExpiresAt),
      send_time: msToInstant(m.sentAt),
      event: envelopeToProto(events[i]!),
    }));
    return { protobuf: encodeProto("LeaseResponse", { messages: out }) };
  }
  return { jsonText: `{"messages":[${messages.map((m, i) => leasedJsonText(m, events[i]!)).join(",")}]}` };
}

function leasedJsonText(m: LeasedMessage, event: EventEnvelope): string {
  const fields = JSON.stringify({
    id: m.id,
    lease_generation: m.leaseGeneration,
    delivery_count: m.deliveries,
    lease_expire_time: formatMs(m.leaseExpiresAt),
    send_time: formatMs(m.sentAt),
  });
  return withMember(fields, "event", eventToJsonText(event));
}

interface LeaseInput {
  max: number;
  visibilityTimeout: number | undefined;
  wait: number;
}

const visibilityRange = [limits.visibilityTimeoutSecondsMin, limits.visibilityTimeoutSecondsMax] as const;

function leaseFromJson(raw: unknown): LeaseInput {
  const body = readObject(raw, "", leaseFields);
  return {
    max: optionalInt(body, "max_messages", "", 1, limits.leaseMessagesMax) ?? apiLimits.leaseMessagesDefault,
    visibilityTimeout: optionalInt(body, "visibility_timeout", "", ...visibilityRange, "seconds"),
    wait: optionalInt(body, "wait", "", 0, limits.leaseWaitSecondsMax, "seconds") ?? 0,
  };
}

function leaseFromProto(body: PbLeaseRequest): LeaseInput {
  return {
    max: nullable(body.max_messages, (v) => checkInt("max_messages", v, 1, limits.leaseMessagesMax)) ?? apiLimits.leaseMessagesDefault,
    visibilityTimeout: nullable(body.visibility_timeout, (v) => checkInt("visibility_timeout", v, ...visibilityRange, "seconds")),
    wait: nullable(body.wait, (v) => checkInt("wait", v, 0, limits.leaseWaitSecondsMax, "seconds")) ?? 0,
  };
}

async function ack(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const refs =
    ctx.requestFormat === "protobuf"
      ? refsFromProto((ctx.body as PbAckRequest).messages, false)
      : refsFromJson(ctx.body, false);
  const result = await ctx.deps.directory.withCell(name, (cell) => cell.settle({ acks: refs.refs }));
  return settleReply(ctx, result);
}

async function nack(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const refs =
    ctx.requestFormat === "protobuf"
      ? refsFromProto((ctx.body as PbNackRequest).messages, true, (ctx.body as PbNackRequest).delay)
      : refsFromJson(ctx.body, true);
  const result = await ctx.deps.directory.withCell(name, (cell) => cell.settle({ nacks: refs.refs }));
  return settleReply(ctx, result);
}

function refsFromJson(raw: unknown, isNack: boolean): { refs: NackRef[] } {
  const body = readObject(raw, "", isNack ? nackFields : ackFields);
  const callDelay = isNack ? optionalInt(body, "delay", "", 0, limits.delaySecondsMax, "seconds") : undefined;
  const list = checkArray("messages", requiredMember(body, "messages", "", refsBound), 1, limits.leaseMessagesMax, "messages");
  const refs = list.map((item, i) => {
    const field = `messages[${i}]`;
    const ref = readObject(item, field, isNack ? nackRefFields : ackRefFields);
    const out: NackRef = {
      id: checkMessageId(`${field}.id`, requiredMember(ref, "id", field, messageIdBound)),
      leaseGeneration: checkInt(
        `${field}.lease_generation`,
        requiredMember(ref, "lease_generation", field, generationBound),
        1,
        leaseGenerationMax,
      ),
    };
    const delay = isNack ? (optionalInt(ref, "delay", field, 0, limits.delaySecondsMax, "seconds") ?? callDelay) : undefined;
    if (delay !== undefined) out.delaySeconds = delay;
    return out;
  });
  return { refs };
}

function refsFromProto(list: PbLeaseRef[] | undefined, isNack: boolean, callDelayRaw?: number | null): { refs: NackRef[] } {
  const refs = checkArray("messages", list ?? [], 1, limits.leaseMessagesMax, "messages") as PbLeaseRef[];
  const callDelay = nullable(callDelayRaw, (v) => checkInt("delay", v, 0, limits.delaySecondsMax, "seconds"));
  return {
    refs: refs.map((ref, i) => {
      const field = `messages[${i}]`;
      const out: NackRef = {
        id: checkMessageId(`${field}.id`, ref.id),
        leaseGeneration: checkInt(`${field}.lease_generation`, int64ToNumber(ref.lease_generation), 1, leaseGenerationMax),
      };
      if (!isNack && ref.delay !== null && ref.delay !== undefined) {
        throw new ApiError("unknown_field", `${field}.delay is for nack; an ack takes no delay`, {
          field: `${field}.delay`,
          bound: "one of: id, lease_generation",
        });
      }
      const own = nullable(ref.delay, (v) => checkInt(`${field}.delay`, v, 0, limits.delaySecondsMax, "seconds"));
      const delay = isNack ? (own ?? callDelay) : undefined;
      if (delay !== undefined) out.delaySeconds = delay;
      return out;
    }),
  };
}

function settleReply(ctx: RouteContext, result: SettleResult): Reply {
  if (ctx.responseFormat === "protobuf") {
    return {
      protobuf: encodeProto("SettleResponse", {
        acked: result.acked,
        retried: result.retried,
        dead_lettered: result.deadLettered,
        stale_leases: result.staleLeases.map((r: LeaseRef) => ({ id: r.id, lease_generation: r.leaseGeneration })),
      }),
    };
  }
  return {
    json: {
      acked: result.acked,
      retried: result.retried,
      dead_lettered: result.deadLettered,
      stale_leases: result.staleLeases.map((r) => ({ id: r.id, lease_generation: r.leaseGeneration })),
    },
  };
}

/** A paused queue delivers to nobody: a lease is refused, as a Cloudflare pull is (409). */
export function deliveryPaused(name: string): ApiError {
  return new ApiError("failed_precondition", `delivery of queue ${name} is paused; resume it (delivery_paused: false) to lease`, {
    field: "delivery_paused",
    bound: "false",
  });
}

/** protobufjs reads an absent `optional` field as null. */
function nullable<T>(value: number | null | undefined, check: (value: number) => T): T | undefined {
  return value === null || value === undefined ? undefined : check(value);
}
