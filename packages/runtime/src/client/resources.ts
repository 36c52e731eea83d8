import type { CloudEvent } from "./events.ts";

/**
 * The API's resources as a TypeScript caller sees them (camelCase, Dates), and how their JSON
 * maps onto them. The wire names are in docs/api.md.
 */
type Json = Record<string, unknown>;

export interface QueueSettings {
  /** Seconds a lease hides a message unless the lease names its own. */
  visibilityTimeout?: number;
  maxDeliveries?: number;
  /** Seconds before a sent message may first be leased, unless the send names its own delay. */
  deliveryDelay?: number;
  /** A queue of the same environment, or null for the queue's own dead-letter set. */
  deadLetterQueue?: string | null;
  /** Seconds a message is kept from when it entered the queue (60 to 1,209,600; default 345,600). */
  retention?: number;
  /** True: nothing is delivered (leases are refused, consumers wait); sends are still taken. */
  deliveryPaused?: boolean;
}

export interface QueueCounts {
  ready: number;
  delayed: number;
  leased: number;
  dead: number;
  movingToDeadLetterQueue: number;
  backlogBytes: number;
  oldestMessageTime: Date | null;
}

export interface Queue {
  name: string;
  id: string;
  origin: "api" | "workers";
  visibilityTimeout: number;
  maxDeliveries: number;
  deliveryDelay: number;
  deadLetterQueue: string | null;
  deadLetterPolicy: "set" | "queue" | "delete";
  retention: number;
  deliveryPaused: boolean;
  createTime: Date;
  updateTime: Date;
  /** Present on get, create and update; list leaves it out. */
  counts?: QueueCounts;
}

export interface LeaseRef {
  id: string;
  leaseGeneration: number;
}

export interface NackRef extends LeaseRef {
  /** Seconds before the message may be leased again. */
  delay?: number;
}

export interface LeasedMessage extends LeaseRef {
  /** 1 on the first delivery. */
  deliveryCount: number;
  leaseExpireTime: Date;
  sendTime: Date;
  event: CloudEvent;
}

export interface SettleResult {
  acked: number;
  retried: number;
  deadLettered: number;
  /** Not applied: another lease holds the message now, or it is gone. */
  staleLeases: LeaseRef[];
}

export interface LeaseOptions {
  maxMessages?: number;
  visibilityTimeout?: number;
  /** Seconds to wait for a message when none is ready (a long poll). */
  wait?: number;
  /** Aborting ends the wait; messages leased for the aborted call go back to the queue. */
  signal?: AbortSignal;
}

export interface DeadLetter {
  id: string;
  deadLetterTime: Date;
  deliveryCount: number;
  sendTime: Date;
  event: CloudEvent;
}

export interface EventFilter {
  types?: string[];
  sources?: string[];
}

export interface Subscription {
  name: string;
  id: string;
  queue: string;
  filter: { types: string[]; sources: string[] };
  createTime: Date;
  updateTime: Date;
}

export interface Page {
  pageSize?: number;
  pageToken?: string;
}

export function settingsToJson(settings: QueueSettings): Json {
  const out: Json = {};
  if (settings.visibilityTimeout !== undefined) out["visibility_timeout"] = settings.visibilityTimeout;
  if (settings.maxDeliveries !== undefined) out["max_deliveries"] = settings.maxDeliveries;
  if (settings.deliveryDelay !== undefined) out["delivery_delay"] = settings.deliveryDelay;
  if (settings.deadLetterQueue !== undefined) out["dead_letter_queue"] = settings.deadLetterQueue;
  if (settings.retention !== undefined) out["retention"] = settings.retention;
  if (settings.deliveryPaused !== undefined) out["delivery_paused"] = settings.deliveryPaused;
  return out;
}

export function queueFromJson(q: Json): Queue {
  const queue: Queue = {
    name: q["name"] as string,
    id: q["id"] as string,
    origin: q["origin"] as Queue["origin"],
    visibilityTimeout: q["visibility_timeout"] as number,
    maxDeliveries: q["max_deliveries"] as number,
    deliveryDelay: q["delivery_delay"] as number,
    deadLetterQueue: q["dead_letter_queue"] as string | null,
    deadLetterPolicy: q["dead_letter_policy"] as Queue["deadLetterPolicy"],
    retention: q["retention"] as number,
    deliveryPaused: q["delivery_paused"] as boolean,
    createTime: new Date(q["create_time"] as string),
    updateTime: new Date(q["update_time"] as string),
  };
  const c = q["counts"] as Json | undefined;
  if (c !== undefined) {
    queue.counts = {
      ready: c["ready"] as number,
      delayed: c["delayed"] as number,
      leased: c["leased"] as number,
      dead: c["dead"] as number,
      movingToDeadLetterQueue: c["moving_to_dead_letter_queue"] as number,
      backlogBytes: c["backlog_bytes"] as number,
      oldestMessageTime: c["oldest_message_time"] === null ? null : new Date(c["oldest_message_time"] as string),
    };
  }
  return queue;
}

export function subscriptionFromJson(s: Json): Subscription {
  return {
    name: s["name"] as string,
    id: s["id"] as string,
    queue: s["queue"] as string,
    filter: s["filter"] as Subscription["filter"],
    createTime: new Date(s["create_time"] as string),
    updateTime: new Date(s["update_time"] as string),
  };
}

export function settleFromJson(out: Json): SettleResult {
  return {
    acked: out["acked"] as number,
    retried: out["retried"] as number,
    deadLettered: out["dead_lettered"] as number,
    staleLeases: (out["stale_leases"] as Json[]).map((r) => ({ id: r["id"] as string, leaseGeneration: r["lease_generation"] as number })),
  };
}

