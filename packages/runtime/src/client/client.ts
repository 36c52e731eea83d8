import { Pool, type Dispatcher } from "undici";
import { apiLimits } from "../api/api-limits.ts";
import { tooLarge } from "../wire/api-error.ts";
import { protobufMediaType } from "../wire/media-types.ts";
import {
  decodeProto,
  encodeProto,
  int64ToNumber,
  timestampToInstant,
  type PbLeaseRef,
  type PbSettleResponse,
} from "../wire/proto-codec.ts";
import { formatRfc3339, instantToMs, msToInstant } from "../wire/timestamps.ts";
import { consume, type ConsumeHandler, type ConsumeOptions, type Consumer } from "./consume.ts";
import { errorFrom, networkErrorFrom, QueuesApiError } from "./errors.ts";
import { listedEventDataTexts } from "../wire/json-source.ts";
import { eventFromJsonWire, eventFromProtoWire, eventToJsonWire, eventToProtoWire, type EventInput, type JsonDataParser } from "./events.ts";
import {
  queueFromJson,
  settingsToJson,
  settleFromJson,
  subscriptionFromJson,
  type DeadLetter,
  type EventFilter,
  type LeasedMessage,
  type LeaseOptions,
  type LeaseRef,
  type NackRef,
  type Page,
  type Queue,
  type QueueSettings,
  type SettleResult,
  type Subscription,
} from "./resources.ts";

type Json = Record<string, unknown>;

export type WireFormat = "protobuf" | "json";

/** What the client's options default to. */
export const clientDefaults = {
  /**
   * A queue takes `limits.producerCallsInFlightMax` sends at once and refuses the rest (429);
   * unbounded, 1,000 sends started together opened 1,000 sockets and had hundreds refused. On
   * loopback a handful of connections keep a queue's group commits full: more only queue in the
   * server instead of here.
   */
  connections: 16,
  /** One per consume() loop, or lease with `wait`, waiting at once; past it they queue. */
  longPollConnections: 16,
} as const;

export interface QueuesClientOptions {
  /** The API's base URL, e.g. `http://127.0.0.1:8788`. */
  url: string;
  apiKey: string;
  /** `orgs/{org}/projects/{project}/envs/{env}`: lets every call name a queue by its id alone. */
  env?: string;
  /** Wire format of send, lease, ack and nack; every other call is JSON. Default protobuf. */
  format?: WireFormat;
  /**
   * Connections for every call but long polls; calls past it wait in the client for one to be
   * free. Default 16; `Infinity` for no bound.
   */
  connections?: number;
  /**
   * Connections for long polls (a lease with `wait` above 0, as consume() makes), kept apart so
   * that waiting polls never hold up other calls. Default 16; `Infinity` for no bound.
   */
  longPollConnections?: number;
  /**
   * Use this dispatcher instead of pools of the client's own, for every call, long polls
   * included (the client will not close it).
   */
  dispatcher?: Dispatcher;
  /**
   * How the `data` of a JSON event is read, from the text the server holds (kept as the producer
   * wrote it). JSON.parse by default, which rounds integers past 2^53; `(text) => text` gives the
   * text itself, in either wire format, for a parser that keeps them.
   */
  parseJsonData?: JsonDataParser;
}

/** A typed client for the whole native queues API, over undici. */
export class QueuesClient {
  readonly format: WireFormat;
  private readonly dispatcher: Dispatcher;
  private readonly longPollDispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly authorization: string;
  private readonly env: string | undefined;
  private readonly origin: string;
  private readonly consumers = new Set<Consumer>();
  private readonly parseJsonData: JsonDataParser | undefined;

  constructor(options: QueuesClientOptions) {
    this.format = options.format ?? "protobuf";
    this.env = options.env;
    this.authorization = `Bearer ${options.apiKey}`;
    this.origin = new URL(options.url).origin;
    this.parseJsonData = options.parseJsonData;
    this.ownsDispatcher = options.dispatcher === undefined;
    const connections = poolSize("connections", options.connections ?? clientDefaults.connections);
    const longPollConnections = poolSize("longPollConnections", options.longPollConnections ?? clientDefaults.longPollConnections);
    this.dispatcher = options.dispatcher ?? new Pool(options.url, { connections });
    this.longPollDispatcher = options.dispatcher ?? new Pool(options.url, { connections: longPollConnections });
  }

  // ---- queues ----

  async createQueue(queue: string, settings: QueueSettings = {}): Promise<Queue> {
    const { env, id } = this.split(queue);
    return queueFromJson(await this.json("POST", `/v1/${env}/queues`, { name: id, ...settingsToJson(settings) }));
  }

  async getQueue(queue: string): Promise<Queue> {
    return queueFromJson(await this.json("GET", this.queuePath(queue)));
  }

  async listQueues(page: Page = {}): Promise<{ queues: Queue[]; nextPageToken?: string }> {
    const out = await this.json("GET", `/v1/${this.requireEnv()}/queues${pageQuery(page)}`);
    return withToken({ queues: (out["queues"] as Json[]).map(queueFromJson) }, out);
  }

  async updateQueue(queue: string, settings: QueueSettings): Promise<Queue> {
    return queueFromJson(await this.json("PATCH", this.queuePath(queue), settingsToJson(settings)));
  }

  async deleteQueue(queue: string): Promise<void> {
    await this.json("DELETE", this.queuePath(queue));
  }

  // ---- messages ----

  /** Sends up to 100 events; resolves with their message ids, in order, once they are durable. */
  async send(queue: string, events: readonly EventInput[], options: { delay?: number } = {}): Promise<{ messageIds: string[] }> {
    const path = `${this.queuePath(queue)}:send`;
    if (this.format === "protobuf") {
      const body = encodeProto("SendRequest", { events: events.map(eventToProtoWire), delay: options.delay ?? null });
      const out = decodeProto("SendResponse", await this.proto(path, body, undefined, this.dispatcher, apiLimits.sendBodyBytesMax));
      return { messageIds: [...out.message_ids] };
    }
    const body: Json = { events: events.map(eventToJsonWire) };
    if (options.delay !== undefined) body["delay"] = options.delay;
    const out = await this.json("POST", path, body, undefined, apiLimits.sendBodyBytesMax);
    return { messageIds: out["message_ids"] as string[] };
  }

  async lease(queue: string, options: LeaseOptions = {}): Promise<LeasedMessage[]> {
    const path = `${this.queuePath(queue)}:lease`;
    const dispatcher = (options.wait ?? 0) > 0 ? this.longPollDispatcher : this.dispatcher;
    if (this.format === "protobuf") {
      const body = encodeProto("LeaseRequest", {
        max_messages: options.maxMessages ?? null,
        visibility_timeout: options.visibilityTimeout ?? null,
        wait: options.wait ?? null,
      });
      const out = decodeProto("LeaseResponse", await this.proto(path, body, options.signal, dispatcher));
      return out.messages.map((m) => ({
        id: m.id,
        leaseGeneration: int64ToNumber(m.lease_generation),
        deliveryCount: m.delivery_count,
        leaseExpireTime: timestampDate(m.lease_expire_time),
        sendTime: timestampDate(m.send_time),
        event: eventFromProtoWire(m.event, this.parseJsonData),
      }));
    }
    const body: Json = {};
    if (options.maxMessages !== undefined) body["max_messages"] = options.maxMessages;
    if (options.visibilityTimeout !== undefined) body["visibility_timeout"] = options.visibilityTimeout;
    if (options.wait !== undefined) body["wait"] = options.wait;
    const { value: out, text } = await this.jsonWithText("POST", path, body, options.signal, dispatcher);
    const dataTexts = this.parseJsonData === undefined ? [] : listedEventDataTexts(text, "messages");
    return (out["messages"] as Json[]).map((m, i) => ({
      id: m["id"] as string,
      leaseGeneration: m["lease_generation"] as number,
      deliveryCount: m["delivery_count"] as number,
      leaseExpireTime: new Date(m["lease_expire_time"] as string),
      sendTime: new Date(m["send_time"] as string),
      event: eventFromJsonWire(m["event"] as Json, dataTexts[i], this.parseJsonData),
    }));
  }

  /** Acks by (id, lease generation); a leased message is a valid reference as it is. */
  async ack(queue: string, refs: readonly LeaseRef[]): Promise<SettleResult> {
    const path = `${this.queuePath(queue)}:ack`;
    if (this.format === "protobuf") {
      const body = encodeProto("AckRequest", { messages: refs.map((r) => ({ id: r.id, lease_generation: r.leaseGeneration })) });
      return settleFromProto(decodeProto("SettleResponse", await this.proto(path, body)));
    }
    const out = await this.json("POST", path, { messages: refs.map((r) => ({ id: r.id, lease_generation: r.leaseGeneration })) });
    return settleFromJson(out);
  }

  /** Returns messages to the queue, at once or after a delay (per message, or `options.delay`). */
  async nack(queue: string, refs: readonly NackRef[], options: { delay?: number } = {}): Promise<SettleResult> {
    const path = `${this.queuePath(queue)}:nack`;
    if (this.format === "protobuf") {
      const body = encodeProto("NackRequest", {
        messages: refs.map((r) => ({ id: r.id, lease_generation: r.leaseGeneration, delay: r.delay ?? null })),
        delay: options.delay ?? null,
      });
      return settleFromProto(decodeProto("SettleResponse", await this.proto(path, body)));
    }
    const messages = refs.map((r) => {
      const ref: Json = { id: r.id, lease_generation: r.leaseGeneration };
      if (r.delay !== undefined) ref["delay"] = r.delay;
      return ref;
    });
    const out = await this.json("POST", path, { messages, ...(options.delay === undefined ? {} : { delay: options.delay }) });
    return settleFromJson(out);
  }

  /** Leases, runs `handler` for each message, acks what succeeded and nacks what threw. */
  consume(queue: string, handler: ConsumeHandler, options: ConsumeOptions = {}): Consumer {
    const consumer = consume(this, queue, handler, options);
    this.consumers.add(consumer);
    const forget = (): void => void this.consumers.delete(consumer);
    consumer.done.then(forget, forget);
    return consumer;
  }

  // ---- dead letters ----

  async listDeadLetters(queue: string, page: Page = {}): Promise<{ deadLetters: DeadLetter[]; nextPageToken?: string }> {
    const { value: out, text } = await this.jsonWithText("GET", `${this.queuePath(queue)}/dead-letters${pageQuery(page)}`);
    const dataTexts = this.parseJsonData === undefined ? [] : listedEventDataTexts(text, "dead_letters");
    const deadLetters = (out["dead_letters"] as Json[]).map((d, i) => ({
      id: d["id"] as string,
      deadLetterTime: new Date(d["dead_letter_time"] as string),
      deliveryCount: d["delivery_count"] as number,
      sendTime: new Date(d["send_time"] as string),
      event: eventFromJsonWire(d["event"] as Json, dataTexts[i], this.parseJsonData),
    }));
    return withToken({ deadLetters }, out);
  }

  /** Returns dead letters to ready with a fresh delivery count: all, or those dead-lettered in [from, to). */
  async replay(queue: string, range: { from?: Date | string; to?: Date | string } = {}): Promise<{ replayed: number }> {
    const body: Json = {};
    if (range.from !== undefined) body["from"] = timeString(range.from);
    if (range.to !== undefined) body["to"] = timeString(range.to);
    const out = await this.json("POST", `${this.queuePath(queue)}:replay`, body);
    return { replayed: out["replayed"] as number };
  }

  async purge(queue: string, scope: "dead_letters" | "all"): Promise<{ purged: number }> {
    const out = await this.json("POST", `${this.queuePath(queue)}:purge`, { scope });
    return { purged: out["purged"] as number };
  }

  // ---- subscriptions and publishing ----

  async createSubscription(subscription: string, input: { queue: string; filter?: EventFilter }): Promise<Subscription> {
    const body: Json = { name: subscription, queue: input.queue };
    if (input.filter !== undefined) body["filter"] = input.filter;
    return subscriptionFromJson(await this.json("POST", `/v1/${this.requireEnv()}/subscriptions`, body));
  }

  async getSubscription(subscription: string): Promise<Subscription> {
    return subscriptionFromJson(await this.json("GET", this.subscriptionPath(subscription)));
  }

  async listSubscriptions(page: Page = {}): Promise<{ subscriptions: Subscription[]; nextPageToken?: string }> {
    const out = await this.json("GET", `/v1/${this.requireEnv()}/subscriptions${pageQuery(page)}`);
    return withToken({ subscriptions: (out["subscriptions"] as Json[]).map(subscriptionFromJson) }, out);
  }

  async updateSubscription(subscription: string, input: { queue?: string; filter?: EventFilter }): Promise<Subscription> {
    return subscriptionFromJson(await this.json("PATCH", this.subscriptionPath(subscription), { ...input }));
  }

  async deleteSubscription(subscription: string): Promise<void> {
    await this.json("DELETE", this.subscriptionPath(subscription));
  }

  /**
   * Publishes events to the environment: each goes to every queue whose subscription matches it.
   * The answer lists, per event, the queues it reached and its message id in each.
   */
  async publish(events: readonly EventInput[]): Promise<{ events: Array<{ deliveries: Array<{ queue: string; messageId: string }> }> }> {
    const out = await this.json("POST", `/v1/${this.requireEnv()}/events:publish`, { events: events.map(eventToJsonWire) }, undefined, apiLimits.sendBodyBytesMax);
    return {
      events: (out["events"] as Json[]).map((e) => ({
        deliveries: (e["deliveries"] as Json[]).map((d) => ({ queue: d["queue"] as string, messageId: d["message_id"] as string })),
      })),
    };
  }

  /**
   * Stops this client's consumers (as their stop() does: waiting polls end at once, running
   * handlers finish and are settled), then closes the connections once other calls in flight
   * have been answered. A consumer left running would otherwise hold close() for its poll's wait,
   * then fail every lease after it.
   */
  async close(): Promise<void> {
    await Promise.allSettled([...this.consumers].map((consumer) => consumer.stop()));
    if (this.ownsDispatcher) await Promise.all([this.dispatcher.close(), this.longPollDispatcher.close()]);
  }

  // ---- plumbing ----

  private async json(method: Dispatcher.HttpMethod, path: string, body?: Json, signal?: AbortSignal, bodyBytesMax?: number): Promise<Json> {
    return (await this.jsonWithText(method, path, body, signal, this.dispatcher, bodyBytesMax)).value;
  }

  private async jsonWithText(
    method: Dispatcher.HttpMethod,
    path: string,
    body?: Json,
    signal?: AbortSignal,
    dispatcher = this.dispatcher,
    bodyBytesMax?: number,
  ): Promise<{ value: Json; text: string }> {
    const headers: Record<string, string> = { authorization: this.authorization, accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await this.call(dispatcher, { method, path, headers, body: body === undefined ? undefined : JSON.stringify(body), signal }, bodyBytesMax);
    const text = Buffer.from(res.bytes).toString("utf8");
    if (res.statusCode >= 300) throw errorFrom(res.statusCode, text, res.headers["retry-after"]);
    return { value: text === "" ? {} : (JSON.parse(text) as Json), text };
  }

  private async proto(path: string, body: Uint8Array, signal?: AbortSignal, dispatcher = this.dispatcher, bodyBytesMax?: number): Promise<Uint8Array> {
    const res = await this.call(
      dispatcher,
      {
        method: "POST",
        path,
        headers: {
          authorization: this.authorization,
          "content-type": protobufMediaType,
          // Errors come back as JSON whatever the request spoke.
          accept: `${protobufMediaType}, application/json;q=0.5`,
        },
        body,
        signal,
      },
      bodyBytesMax,
    );
    if (res.statusCode >= 300) throw errorFrom(res.statusCode, Buffer.from(res.bytes).toString("utf8"), res.headers["retry-after"]);
    return res.bytes;
  }

  /**
   * One request and its whole answer; a connection that fails on the way is a `network_error`. A
   * body over the route's cap (`bodyBytesMax`: a send's or publish's, else every other body's) is
   * refused here as celld would refuse it: past what celld reads of a refused body it closes the
   * connection under the body, and the call would fail as a broken pipe no retry can help.
   */
  private async call(
    dispatcher: Dispatcher,
    request: Omit<Dispatcher.RequestOptions, "origin" | "signal"> & { signal?: AbortSignal | undefined; body?: string | Uint8Array | undefined },
    bodyBytesMax: number = apiLimits.controlBodyBytesMax,
  ): Promise<{ statusCode: number; headers: Record<string, string | string[] | undefined>; bytes: Uint8Array }> {
    if (request.body !== undefined && Buffer.byteLength(request.body) > bodyBytesMax) {
      const refusal = tooLarge(bodyBytesMax);
      throw new QueuesApiError(refusal.status, refusal.toJSON().error);
    }
    try {
      const res = await dispatcher.request({ ...request, origin: this.origin });
      return { statusCode: res.statusCode, headers: res.headers, bytes: new Uint8Array(await res.body.arrayBuffer()) };
    } catch (error) {
      throw request.signal?.aborted === true ? error : networkErrorFrom(error, this.origin);
    }
  }

  private split(queue: string): { env: string; id: string } {
    const slash = queue.lastIndexOf("/queues/");
    if (slash >= 0) return { env: queue.slice(0, slash), id: queue.slice(slash + "/queues/".length) };
    return { env: this.requireEnv(), id: queue };
  }

  private queuePath(queue: string): string {
    const { env, id } = this.split(queue);
    return `/v1/${env}/queues/${encodeURIComponent(id)}`;
  }

  private subscriptionPath(subscription: string): string {
    const prefix = "/subscriptions/";
    const at = subscription.lastIndexOf(prefix);
    const env = at >= 0 ? subscription.slice(0, at) : this.requireEnv();
    const id = at >= 0 ? subscription.slice(at + prefix.length) : subscription;
    return `/v1/${env}/subscriptions/${encodeURIComponent(id)}`;
  }

  private requireEnv(): string {
    if (this.env === undefined) throw new TypeError("this call needs the client's env option, or a full resource name");
    return this.env;
  }
}

/** undici's `connections`: null is its word for no bound. */
function poolSize(option: string, value: number): number | null {
  if (value === Infinity) return null;
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${option} must be a whole number from 1, or Infinity for no bound; got ${value}`);
  return value;
}

function settleFromProto(out: PbSettleResponse): SettleResult {
  return {
    acked: out.acked,
    retried: out.retried,
    deadLettered: out.dead_lettered,
    staleLeases: out.stale_leases.map((r: PbLeaseRef) => ({ id: r.id, leaseGeneration: int64ToNumber(r.lease_generation) })),
  };
}

function timestampDate(ts: Parameters<typeof timestampToInstant>[0]): Date {
  const instant = timestampToInstant(ts);
  return new Date(instant === undefined ? 0 : instantToMs(instant));
}

function timeString(value: Date | string): string {
  return typeof value === "string" ? value : formatRfc3339(msToInstant(value.getTime()));
}

function pageQuery(page: Page): string {
  const query = new URLSearchParams();
  if (page.pageSize !== undefined) query.set("page_size", String(page.pageSize));
  if (page.pageToken !== undefined) query.set("page_token", page.pageToken);
  const text = query.toString();
  return text === "" ? "" : `?${text}`;
}

function withToken<T extends object>(value: T, out: Json): T & { nextPageToken?: string } {
  return typeof out["next_page_token"] === "string" ? { ...value, nextPageToken: out["next_page_token"] } : value;
}
