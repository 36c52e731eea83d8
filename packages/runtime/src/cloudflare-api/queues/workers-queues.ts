import type { ConsumerConfig, Deployment } from "../../config/index.ts";
import type { ConfigConsumer, WorkersQueueInfo } from "../services.ts";

/**
 * The Workers config's side of its queues, as `queues info` shows it: the Workers that produce to
 * each and the consumer the config declares (a Worker, or `type = "http_pull"`). Read from the
 * deployment each call, so a restart under --watch is seen at once.
 */
export function workersQueuesOf(deployment: () => Deployment): WorkersQueueInfo {
  return {
    producers: (queue) =>
      deployment()
        .workers.filter((w) => w.producers.some((p) => p.queue === queue))
        .map((w) => w.name),
    consumers: (queue) =>
      deployment().workers.flatMap((w) => w.consumers.filter((c) => c.queue === queue).map((c) => configConsumer(w.name, c))),
  };
}

function configConsumer(script: string, c: ConsumerConfig): ConfigConsumer {
  const settings: Record<string, number> =
    c.type === "http_pull"
      ? {
          batch_size: c.maxBatchSize,
          max_retries: c.maxRetries,
          retry_delay: c.retryDelaySeconds,
          ...(c.visibilityTimeoutMs === undefined ? {} : { visibility_timeout_ms: c.visibilityTimeoutMs }),
        }
      : {
          batch_size: c.maxBatchSize,
          max_retries: c.maxRetries,
          max_wait_time_ms: c.maxBatchTimeoutSeconds * 1000,
          max_concurrency: c.maxConcurrency,
          retry_delay: c.retryDelaySeconds,
        };
  return { type: c.type, script: c.type === "worker" ? script : undefined, settings, deadLetterQueue: c.deadLetterQueue };
}
