import { limits } from "@celld/queue-cell";

/** What workerd's Fetcher.queue() reports about one queue() invocation. */
export interface QueueHandlerResult {
  /** "ok", "exception", "exceededCpu", "exceededMemory", "canceled", ... */
  outcome: string;
  ackAll: boolean;
  retryBatch: { retry: boolean; delaySeconds?: number };
  explicitAcks: string[];
  retryMessages: Array<{ msgId: string; delaySeconds?: number }>;
}

export interface BatchSettlement<T> {
  acks: T[];
  retries: Array<{ message: T; delaySeconds: number }>;
}

/**
 * Decides each message's fate from a handler's result. workerd records the calls a handler made
 * but does not resolve them (its own tests expect ackAll beside retryMessages), so the host does,
 * per message: explicit ack, then its own retry, then ackAll, then retryAll, then the outcome (a
 * handler that returned acks the rest; one that threw retries them).
 *
 * A retry waits for the message's own delay, else the batch's, else the consumer's retry_delay.
 * The messages come back as given, so that a leased message is its own lease ref.
 */
export function resolveBatchOutcome<T extends { id: string }>(
  messages: readonly T[],
  result: QueueHandlerResult,
  retryDelaySeconds: number,
): BatchSettlement<T> {
  const acked = new Set(result.explicitAcks);
  const retried = new Map(result.retryMessages.map((r) => [r.msgId, r.delaySeconds]));
  const batchDelay = result.retryBatch.retry ? result.retryBatch.delaySeconds : undefined;
  const settlement: BatchSettlement<T> = { acks: [], retries: [] };
  for (const message of messages) {
    // Most handlers name no message: then no id is looked up.
    if (acked.size > 0 && acked.has(message.id)) settlement.acks.push(message);
    else if (retried.size > 0 && retried.has(message.id)) {
      settlement.retries.push({ message, delaySeconds: retryDelay(retried.get(message.id) ?? batchDelay, retryDelaySeconds) });
    } else if (result.ackAll) settlement.acks.push(message);
    else if (result.retryBatch.retry) settlement.retries.push({ message, delaySeconds: retryDelay(batchDelay, retryDelaySeconds) });
    else if (result.outcome === "ok") settlement.acks.push(message);
    else settlement.retries.push({ message, delaySeconds: retryDelay(undefined, retryDelaySeconds) });
  }
  return settlement;
}

/**
 * workerd passes a Worker's delaySeconds through unchecked; Cloudflare truncates and bounds it.
 * A bad value must not fail the whole settlement, so it is brought into range here.
 */
function retryDelay(requested: number | undefined, fallback: number): number {
  const value = requested ?? fallback;
  if (!Number.isFinite(value) || value < 0) return 0;
  return Math.min(Math.floor(value), limits.delaySecondsMax);
}
