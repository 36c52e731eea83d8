import type { QueueRow } from "../../api/catalog.ts";
import { CloudflareError } from "../cloudflare-errors.ts";
import type { CloudflareContext } from "../route.ts";

/** Queues' own codes (developers.cloudflare.com/queues/reference/error-codes). */
export const queueCodes = {
  queueNotFound: 10104,
  queueIdMalformed: 10107,
  batchDelayInvalid: 10202,
  messageMetadataInvalid: 10203,
  messageSize: 10204,
  batchSize: 10205,
  batchCount: 10206,
  bodyInvalid: 10207,
  overloaded: 10250,
  /** wrangler: "The specified consumer settings are invalid." */
  consumerSettingsInvalid: 100127,
  /** wrangler: "The specified queue settings are invalid." */
  queueSettingsInvalid: 100128,
} as const;

/** What a queue route's shared-code failures become. */
export const queueRouteCodes = { not_found: queueCodes.queueNotFound } as const;

const queueIdPattern = /^que_[0-9a-z]{6}[0-9A-Z]{26}$/;

/**
 * The queue a path's `{queue}` names: its id (`que_...`, the native API's id), in the token's own
 * environment. Another environment's queue is "not found", as an unknown id is.
 */
export function queueOf(ctx: CloudflareContext): QueueRow {
  const id = ctx.params["queue"]!;
  if (!queueIdPattern.test(id)) {
    throw new CloudflareError(400, queueCodes.queueIdMalformed, `${JSON.stringify(id)} is not a queue id: celld's queue ids have the form que_<6 characters><ULID>, as the queue list answers them`);
  }
  const row = ctx.deps.catalog.getQueueById(id);
  const found = row === undefined || row.env !== ctx.env ? undefined : ctx.deps.directory.find(row.name);
  if (found === undefined || found.queueId !== id) {
    throw new CloudflareError(404, queueCodes.queueNotFound, `Queue does not exist: no queue ${id} in this account's environment (${ctx.env})`);
  }
  return found;
}
