import { limits } from "@celld/queue-cell";
import type { ConfigWarning } from "./issues.ts";
import type { WorkerFile } from "./schema.ts";

/**
 * A queue deletes a message four days after it entered, whatever state it is in, and retention is
 * not configurable here (Cloudflare lets it go to 14 days). A consumer whose retries, spaced by
 * retry_delay, cannot all fit in that time loses a failing message before its last delivery: it is
 * deleted without a word, and never reaches the dead-letter queue the config promises it.
 */
export function retryRetentionWarnings(file: string, config: WorkerFile): ConfigWarning[] {
  const retention = limits.retentionSeconds;
  return (config.queues?.consumers ?? []).flatMap((consumer, i) => {
    const lastRetryAt = consumer.max_retries * consumer.retry_delay;
    if (lastRetryAt < retention) return [];
    const dlq = consumer.dead_letter_queue;
    return [
      {
        file,
        path: `queues.consumers[${i}].retry_delay`,
        message:
          `the last of ${consumer.max_retries} retries ${consumer.retry_delay} s apart comes at least ${lastRetryAt} s after ` +
          `a message entered queue "${consumer.queue}", and a queue keeps a message for ${retention} s: one that keeps ` +
          `failing is deleted before that delivery${dlq === undefined ? "" : `, and never reaches the dead-letter queue "${dlq}"`} ` +
          `(keep max_retries × retry_delay under ${retention} s)`,
      },
    ];
  });
}
