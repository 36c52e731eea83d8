import { CellError, checkRange } from "./errors.ts";
import { limits } from "./limits.ts";

/** Where a message goes after its last allowed delivery fails. */
export type DeadLetterPolicy =
  /** Into the queue's own dead-letter set, where it can be listed and replayed. */
  | { kind: "set" }
  /** Into another queue (cell), moved idempotently by message id. */
  | { kind: "queue"; queue: string }
  /** Deleted: a Cloudflare consumer without a dead_letter_queue. */
  | { kind: "delete" };

export interface QueueConfig {
  /** Deliveries before a message is dead-lettered (a Worker consumer's max_retries + 1). */
  maxDeliveries: number;
  /** How long a lease hides a message when the lease call names no visibility timeout. */
  visibilityTimeoutSeconds: number;
  /** Delay applied to a sent message that names none (a producer's delivery_delay). */
  deliveryDelaySeconds: number;
  deadLetter: DeadLetterPolicy;
  /**
   * How long a message is kept from when it entered the queue, in every state. Lowered, it applies
   * to the messages already there from then on.
   */
  retentionSeconds: number;
  /**
   * Delivery paused (Cloudflare's delivery_paused): consumers take nothing and pulls are refused;
   * sends are still taken and retention still runs. The cell only keeps the flag: its readers (the
   * consumer dispatcher, the APIs) act on it.
   */
  deliveryPaused: boolean;
}

export const defaultQueueConfig: QueueConfig = {
  maxDeliveries: limits.maxDeliveriesDefault,
  visibilityTimeoutSeconds: limits.visibilityTimeoutSecondsDefault,
  deliveryDelaySeconds: 0,
  deadLetter: { kind: "set" },
  retentionSeconds: limits.retentionSeconds,
  deliveryPaused: false,
};

/** Fills defaults and checks every bound; the cell trusts what this returns. */
export function resolveQueueConfig(
  input: Partial<QueueConfig>,
  base: QueueConfig = defaultQueueConfig,
  queueName?: string,
): QueueConfig {
  // A config stored before a setting existed lacks it: the default fills it.
  const merged: QueueConfig = { ...defaultQueueConfig, ...base, ...stripUndefined(input) };
  checkRange("maxDeliveries", merged.maxDeliveries, limits.maxDeliveriesMin, limits.cellDeliveriesMax, {
    integer: true,
  });
  checkRange(
    "visibilityTimeoutSeconds",
    merged.visibilityTimeoutSeconds,
    limits.visibilityTimeoutSecondsMin,
    limits.visibilityTimeoutSecondsMax,
    { integer: true, unit: "seconds" },
  );
  checkRange("deliveryDelaySeconds", merged.deliveryDelaySeconds, 0, limits.delaySecondsMax, {
    integer: true,
    unit: "seconds",
    code: "ERR_DELAY_OUT_OF_RANGE",
  });
  checkRange("retentionSeconds", merged.retentionSeconds, limits.retentionSecondsMin, limits.retentionSecondsMax, {
    integer: true,
    unit: "seconds",
  });
  if (typeof merged.deliveryPaused !== "boolean") {
    throw new CellError("ERR_INVALID", "deliveryPaused must be true or false", { field: "deliveryPaused", value: merged.deliveryPaused });
  }
  const dl = merged.deadLetter as DeadLetterPolicy | undefined;
  if (dl === undefined || !["set", "queue", "delete"].includes(dl.kind)) {
    throw new CellError("ERR_INVALID", `deadLetter.kind must be "set", "queue" or "delete"`, {
      field: "deadLetter.kind",
      value: dl?.kind,
    });
  }
  if (dl.kind === "queue") {
    if (typeof dl.queue !== "string" || dl.queue.length === 0) {
      throw new CellError("ERR_INVALID", "deadLetter.queue must name a queue", {
        field: "deadLetter.queue",
        value: dl.queue,
      });
    }
    if (queueName !== undefined && dl.queue === queueName) {
      throw new CellError("ERR_INVALID", `queue "${queueName}" cannot be its own dead-letter queue`, {
        field: "deadLetter.queue",
        value: dl.queue,
      });
    }
  }
  return merged;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** "4-day retention", or "3600-second retention" for a retention of no whole number of days. */
export function retentionWords(seconds: number): string {
  return seconds % 86_400 === 0 ? `${seconds / 86_400}-day` : `${seconds}-second`;
}
