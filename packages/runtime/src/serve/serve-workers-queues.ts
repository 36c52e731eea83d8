import type { WorkerConfig } from "../config/index.ts";
import type { WorkersQueueInfo } from "../cloudflare-api/services.ts";

/**
 * The Workers side of `celld serve`'s queues, for `queues info` and deploy's look-ups: producers
 * are the running Workers' queue bindings. Their consumers are the API's (wrangler's consumer
 * calls after an upload, plugins/added-consumers.ts), shown as such, so none is listed here as
 * config-owned.
 */
export function servedWorkersQueues(running: () => readonly WorkerConfig[]): WorkersQueueInfo {
  return {
    producers: (queue) => running().filter((w) => w.producers.some((p) => p.queue === queue)).map((w) => w.name),
    consumers: () => [],
  };
}
