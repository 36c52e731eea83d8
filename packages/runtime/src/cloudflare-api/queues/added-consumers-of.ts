import { existsSync } from "node:fs";
import { join } from "node:path";
import { Catalog, type ConsumerRow } from "../../api/catalog.ts";
import { shortId } from "../../api/names.ts";
import { defaultWorkerEnv } from "../../api/queue-directory.ts";
import type { ApiDeps } from "../../api/router.ts";
import type { AddedConsumer } from "../../plugins/added-consumers.ts";

/**
 * The catalog's consumers as the host runs them (plugins/added-consumers.ts). Settings are
 * Cloudflare's names (consumer-settings.ts fills every one in): batch_size, max_wait_time_ms,
 * max_concurrency, retry_delay for a Worker consumer; max_retries and visibility_timeout_ms make
 * the policy of its cell.
 */
export function addedConsumerOf(row: ConsumerRow, cellNameOf: (name: string) => string): AddedConsumer {
  const setting = (name: string): number => {
    const value = row.settings[name];
    if (value === undefined) throw new Error(`assertion: consumer ${row.consumerId} was stored without settings.${name}`);
    return value;
  };
  const visibilityMs = row.settings["visibility_timeout_ms"];
  return {
    consumerId: row.consumerId,
    cell: cellNameOf(row.queue),
    queue: shortId(row.queue),
    type: row.type,
    policy: {
      maxDeliveries: setting("max_retries") + 1,
      // Cloudflare deletes a message after its last retry when the consumer names no dead-letter queue.
      deadLetter: row.deadLetterQueue === null ? { kind: "delete" } : { kind: "queue", queue: cellNameOf(row.deadLetterQueue) },
      // A pull consumer's lease length, in the cell's whole seconds (rounded up).
      ...(visibilityMs === undefined ? {} : { visibilityTimeoutSeconds: Math.ceil(visibilityMs / 1000) }),
    },
    push:
      row.type === "worker" && row.script !== null
        ? {
            worker: row.script,
            maxBatchSize: setting("batch_size"),
            maxBatchTimeoutSeconds: setting("max_wait_time_ms") / 1000,
            maxConcurrency: setting("max_concurrency"),
            retryDelaySeconds: setting("retry_delay"),
          }
        : undefined,
  };
}

/** Tells the host (if the API has one: ApiDeps.addedConsumers) the catalog's consumers after a change. */
export async function tellAddedConsumers(deps: ApiDeps, except?: string): Promise<void> {
  if (deps.addedConsumers === undefined) return;
  const rows = deps.catalog.allConsumers().filter((row) => row.queue !== except);
  await deps.addedConsumers.set(rows.map((row) => addedConsumerOf(row, (name) => deps.directory.cellNameOf(name))));
}

/**
 * The consumers the API added, read from `<dataDir>/api/catalog.sqlite` before anything starts
 * (none when there is no catalog yet): a host starting gives its queues their policies and runs
 * their Worker consumers, with the API's port or without it. The queue names are those of
 * the Workers environment (`celld dev`'s, or `celld serve --workers-env`; QueueDirectory.cellNameOf).
 */
export function readAddedConsumers(dataDir: string, workerEnv = defaultWorkerEnv): AddedConsumer[] {
  if (!existsSync(join(dataDir, "api", "catalog.sqlite"))) return [];
  const catalog = Catalog.open(dataDir);
  try {
    const workerQueues = `${workerEnv}/queues/`;
    return catalog.allConsumers().map((row) => addedConsumerOf(row, (name) => (name.startsWith(workerQueues) ? shortId(name) : name)));
  } finally {
    catalog.close();
  }
}
