import { CellError, checkRange } from "./errors.ts";
import { limits } from "./limits.ts";
import { checkDelay } from "./send-input.ts";
import type { CellStore, StoredMessage } from "./store.ts";

/**
 * What a cell's calls take and answer (QueueCell's send, lease, settle, counts, listDead, replay):
 * the shapes every caller of a cell sees, whatever store keeps it, read from a store's rows and
 * totals here; and the check of a lease ref.
 */

export interface BacklogMetrics {
  /** Ready, delayed and leased messages. */
  backlogCount: number;
  backlogBytes: number;
  /** Entry time of the oldest backlog message, ms; 0 when there is none. */
  oldestMessageTimestamp: number;
}

export interface SendResult {
  ids: string[];
  metrics: BacklogMetrics;
}

export interface LeaseOptions {
  /** Most messages to lease, 1 to 100. */
  max: number;
  visibilityTimeoutSeconds?: number;
  /** Wait up to this long for a message when none is ready, 0 to 20 s. */
  waitSeconds?: number;
  /** Ends a wait early (the client went away); the lease then answers empty. */
  signal?: AbortSignal;
  /**
   * With a wait: lease only once `max` messages are due, or when the wait ends, whatever is due
   * then (possibly nothing). How a consumer fills a batch without a lease for every send.
   */
  fill?: boolean;
  /**
   * Who holds the lease, for expireLeasesOf: a host's own consumer names itself, so that its next
   * start can end what a crash left leased. 0 (the default) is nobody in particular.
   */
  owner?: number;
}

export interface LeaseRef {
  id: string;
  leaseGeneration: number;
}

export interface NackRef extends LeaseRef {
  delaySeconds?: number;
}

export interface SettleResult {
  acked: number;
  /** Returned to ready (now or after their delay). */
  retried: number;
  /** Nacked on their last allowed delivery, and so dead-lettered. */
  deadLettered: number;
  /** Not applied: another lease has taken the message since, or it is gone. */
  staleLeases: LeaseRef[];
}

export interface CellCounts {
  ready: number;
  delayed: number;
  leased: number;
  dead: number;
  /** Dead-lettered into another queue, not yet committed there. */
  movingToDeadLetterQueue: number;
  backlogBytes: number;
  /** Entry time of the oldest backlog message, ms, or null. */
  oldestMessageAt: number | null;
}

export interface DeadMessage {
  id: string;
  /** Cursor for the next page. */
  seq: number;
  deadAt: number;
  deliveries: number;
  sentAt: number;
  enqueuedAt: number;
  contentType: string;
  attributes: string | null;
  body: Uint8Array;
}

/** A message as peekReady shows it: not leased, its delivery not counted. */
export interface PeekedMessage {
  id: string;
  /** Cursor for the next page. */
  seq: number;
  /** When it can be leased: its send, or the end of its delay. */
  availableAt: number;
  deliveries: number;
  sentAt: number;
  enqueuedAt: number;
  contentType: string;
  attributes: string | null;
  body: Uint8Array;
}

export interface ReplayRange {
  /** Dead-lettered at or after, ms. */
  fromMs?: number;
  /** Dead-lettered before, ms. */
  toMs?: number;
}

/** A lease's options checked, each against its bound; `visibilityDefault` is the queue's setting. */
export function checkLeaseOptions(
  options: LeaseOptions,
  visibilityDefault: number,
): { max: number; visibilitySeconds: number; waitSeconds: number; owner: number } {
  const max = checkRange("max", options.max, 1, limits.leaseMessagesMax, { integer: true, unit: "messages" });
  const visibilitySeconds = checkRange(
    "visibilityTimeoutSeconds",
    options.visibilityTimeoutSeconds ?? visibilityDefault,
    limits.visibilityTimeoutSecondsMin,
    limits.visibilityTimeoutSecondsMax,
    { unit: "seconds" },
  );
  const waitSeconds = checkRange("waitSeconds", options.waitSeconds ?? 0, 0, limits.leaseWaitSecondsMax, { unit: "seconds" });
  const owner = checkRange("owner", options.owner ?? 0, 0, Number.MAX_SAFE_INTEGER, { integer: true });
  return { max, visibilitySeconds, waitSeconds, owner };
}

/** A settle's acks and nacks checked (each ref, and a nack's delay). */
export function checkSettleInput(input: { acks?: readonly LeaseRef[]; nacks?: readonly NackRef[] }): {
  acks: readonly LeaseRef[];
  nacks: readonly NackRef[];
} {
  const acks = input.acks ?? [];
  const nacks = input.nacks ?? [];
  acks.forEach((ref, i) => checkLeaseRef("acks", i, ref));
  nacks.forEach((ref, i) => {
    checkLeaseRef("nacks", i, ref);
    if (ref.delaySeconds !== undefined) checkDelay(`nacks[${i}].delaySeconds`, ref.delaySeconds);
  });
  return { acks, nacks };
}

/** `list[index]` names the ref in an error; the name is built only then (this runs for every ack). */
export function checkLeaseRef(list: string, index: number, ref: LeaseRef): void {
  if (ref === null || typeof ref !== "object" || typeof ref.id !== "string" || ref.id.length === 0) {
    throw new CellError("ERR_INVALID", `${list}[${index}].id must name a message`, { field: `${list}[${index}].id` });
  }
  if (!Number.isSafeInteger(ref.leaseGeneration) || ref.leaseGeneration < 1) {
    checkRange(`${list}[${index}].leaseGeneration`, ref.leaseGeneration, 1, Number.MAX_SAFE_INTEGER, { integer: true });
  }
}

/** Backlog figures from a store's totals (send's answer, backlogMetrics). */
export function backlogMetricsOf(store: CellStore): BacklogMetrics {
  const totals = store.totals();
  return {
    backlogCount: totals.ready + totals.leased,
    backlogBytes: totals.backlogBytes,
    oldestMessageTimestamp: store.oldestBacklogEnqueuedAt() ?? 0,
  };
}

/** The counts of a store at `nowMs`: ready ones split into due and delayed. */
export function countsOf(store: CellStore, nowMs: number): CellCounts {
  const totals = store.totals();
  const delayed = store.countDelayed(nowMs);
  return {
    ready: totals.ready - delayed,
    delayed,
    leased: totals.leased,
    dead: totals.dead,
    movingToDeadLetterQueue: totals.moving,
    backlogBytes: totals.backlogBytes,
    oldestMessageAt: store.oldestBacklogEnqueuedAt(),
  };
}

export function deadMessageOf(m: StoredMessage): DeadMessage {
  return {
    id: m.id,
    seq: m.seq,
    deadAt: m.dueAt,
    deliveries: m.deliveries,
    sentAt: m.sentAt,
    enqueuedAt: m.enqueuedAt,
    contentType: m.contentType,
    attributes: m.attributes,
    body: m.body,
  };
}

export function peekedMessageOf(m: StoredMessage): PeekedMessage {
  return {
    id: m.id,
    seq: m.seq,
    availableAt: m.dueAt,
    deliveries: m.deliveries,
    sentAt: m.sentAt,
    enqueuedAt: m.enqueuedAt,
    contentType: m.contentType,
    attributes: m.attributes,
    body: m.body,
  };
}
