import { limits, type Cell } from "@celld/queue-cell";
import type { ApiQueueSettings, QueueRow } from "../../api/catalog.ts";
import { CloudflareError, CloudflareNumberError } from "../cloudflare-errors.ts";
import type { CloudflareContext } from "../route.ts";
import { queueCodes } from "./queue-lookup.ts";

/** A queue's `settings` as Cloudflare names them. */
export interface CloudflareQueueSettings {
  delivery_delay: number;
  delivery_paused: boolean;
  message_retention_period: number;
}

export function queueSettingsOf(ctx: CloudflareContext, row: QueueRow, cell: Cell): CloudflareQueueSettings {
  const { settings } = ctx.deps.directory.view(row, cell);
  return {
    delivery_delay: settings.deliveryDelay,
    delivery_paused: settings.deliveryPaused,
    message_retention_period: settings.retentionSeconds,
  };
}

const settingNames: ReadonlySet<string> = new Set(["delivery_delay", "delivery_paused", "message_retention_period"]);

/** `settings` of a create or update body, each checked; absent members stay undefined. */
export function readQueueSettings(raw: unknown): Partial<CloudflareQueueSettings> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw invalid("settings must be an object");
  const out: Partial<CloudflareQueueSettings> = {};
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    if (!settingNames.has(name)) throw invalid(`settings.${name} is not a queue setting; they are ${[...settingNames].join(", ")}`);
    if (value === undefined || value === null) continue;
    if (name === "delivery_paused") {
      if (typeof value !== "boolean") throw invalid(`settings.delivery_paused must be true or false, got ${JSON.stringify(value)}`);
      out.delivery_paused = value;
    } else if (name === "delivery_delay") {
      out.delivery_delay = intIn("settings.delivery_delay", value, 0, limits.delaySecondsMax);
    } else {
      out.message_retention_period = intIn("settings.message_retention_period", value, limits.retentionSecondsMin, limits.retentionSecondsMax);
    }
  }
  return out;
}

/**
 * Applies changed settings. An API queue's are the catalog's (the native API's update); a Workers
 * queue's delivery delay is its producers' config, so the API may not change it.
 */
export async function applyQueueSettings(ctx: CloudflareContext, row: QueueRow, cell: Cell, wanted: Partial<CloudflareQueueSettings>): Promise<void> {
  const current = queueSettingsOf(ctx, row, cell);
  const { directory } = ctx.deps;
  if (wanted.delivery_delay !== undefined && wanted.delivery_delay !== current.delivery_delay) {
    if (row.settings === null) {
      throw invalid(`settings.delivery_delay of ${row.queue} is its producers' delivery_delay in the Workers config; change it there`);
    }
    const patch: Partial<ApiQueueSettings> = { deliveryDelay: wanted.delivery_delay };
    await directory.update(row.name, patch);
  }
  const retentionSeconds = wanted.message_retention_period;
  const deliveryPaused = wanted.delivery_paused;
  if (retentionSeconds !== undefined || deliveryPaused !== undefined) {
    await directory.setDelivery(row.name, { retentionSeconds, deliveryPaused });
  }
}

function intIn(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new CloudflareNumberError(400, queueCodes.queueSettingsInvalid, field, `${field} must be an integer from ${min} to ${max} seconds`, value);
  }
  return value;
}

function invalid(message: string): CloudflareError {
  return new CloudflareError(400, queueCodes.queueSettingsInvalid, message);
}
