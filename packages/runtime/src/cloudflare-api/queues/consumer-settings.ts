import { limits } from "@celld/queue-cell";
import { CloudflareError, CloudflareNumberError } from "../cloudflare-errors.ts";
import { queueCodes } from "./queue-lookup.ts";

/** Cloudflare's consumer settings, by consumer type, with their bounds (celld's limits) and defaults. */
const bounds = {
  batch_size: [limits.maxBatchSizeMin, limits.maxBatchSizeMax, limits.maxBatchSizeDefault],
  max_retries: [0, limits.maxRetriesMax, limits.maxRetriesDefault],
  retry_delay: [0, limits.delaySecondsMax, 0],
  max_wait_time_ms: [0, limits.batchTimeoutSecondsMax * 1000, limits.batchTimeoutSecondsDefault * 1000],
  max_concurrency: [limits.maxConcurrencyMin, limits.maxConcurrencyMax, limits.maxConcurrencyMax],
  visibility_timeout_ms: [
    limits.visibilityTimeoutSecondsMin * 1000,
    limits.visibilityTimeoutSecondsMax * 1000,
    limits.visibilityTimeoutSecondsDefault * 1000,
  ],
} as const;

type SettingName = keyof typeof bounds;

const byType: Record<"worker" | "http_pull", readonly SettingName[]> = {
  worker: ["batch_size", "max_retries", "max_wait_time_ms", "max_concurrency", "retry_delay"],
  http_pull: ["batch_size", "max_retries", "visibility_timeout_ms", "retry_delay"],
};

/**
 * A consumer's settings: each given one checked against its bound, the others at Cloudflare's
 * defaults (`base`'s for an update), every one present in the result.
 */
export function readConsumerSettings(type: "worker" | "http_pull", raw: unknown, base?: Record<string, number>): Record<string, number> {
  if (raw !== undefined && raw !== null && (typeof raw !== "object" || Array.isArray(raw))) throw invalid("settings must be an object");
  const given = (raw ?? {}) as Record<string, unknown>;
  const names = byType[type];
  for (const name of Object.keys(given)) {
    if (!(names as readonly string[]).includes(name)) {
      throw invalid(`settings.${name} is not a setting of a ${type} consumer; they are ${names.join(", ")}`);
    }
  }
  const out: Record<string, number> = {};
  for (const name of names) {
    const [min, max, fallback] = bounds[name];
    const value = given[name];
    if (value === undefined || value === null) {
      out[name] = base?.[name] ?? fallback;
      continue;
    }
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
      throw new CloudflareNumberError(400, queueCodes.consumerSettingsInvalid, `settings.${name}`, `settings.${name} must be an integer from ${min} to ${max}`, value);
    }
    out[name] = value;
  }
  return out;
}

function invalid(message: string): CloudflareError {
  return new CloudflareError(400, queueCodes.consumerSettingsInvalid, message);
}
