import type { Cell } from "@celld/queue-cell";
import type { QueueRow } from "../../api/catalog.ts";
import type { CloudflareContext } from "../route.ts";
import { consumerJson, consumersOf, producersOf } from "./queue-consumers.ts";
import { queueSettingsOf } from "./queue-settings.ts";

/** The queue object wrangler and the SDK read (`queues info`, `queues list`, deploy's look-ups). */
export function queueJson(ctx: CloudflareContext, row: QueueRow, cell: Cell): Record<string, unknown> {
  const consumers = consumersOf(ctx, row).map((c) => consumerJson(row, c));
  const producers = producersOf(ctx, row).map((script) => ({ type: "worker", script }));
  return {
    queue_id: row.queueId,
    queue_name: row.queue,
    created_on: new Date(row.createMs).toISOString(),
    modified_on: new Date(row.updateMs).toISOString(),
    producers,
    producers_total_count: producers.length,
    consumers,
    consumers_total_count: consumers.length,
    settings: queueSettingsOf(ctx, row, cell),
  };
}
