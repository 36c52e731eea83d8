import type { ApiDeps } from "../../api/router.ts";
import { CloudflareError } from "../cloudflare-errors.ts";
import type { CloudflareContext, CloudflareReply, CloudflareRoute } from "../route.ts";
import { queueJson } from "./queue-json.ts";
import { queueCodes, queueOf, queueRouteCodes } from "./queue-lookup.ts";
import { objectBody } from "./routes-queues.ts";

const purgePath = "/accounts/{account}/queues/{queue}/purge";
const codes = queueRouteCodes;

/** `wrangler queues purge --force` and the SDK's queues.purge.start / status. */
export const cloudflarePurgeRoutes: CloudflareRoute[] = [
  { method: "POST", path: purgePath, scope: "events:write", body: "json", codes, handle: purge },
  { method: "GET", path: purgePath, scope: "events:read", body: "none", codes, handle: purgeStatus },
];

interface PurgeRecord {
  startedAt: number;
  completed: boolean;
}

/** The last purge of each queue (by id) this server ran, for the status call; forgotten at restart. */
const purgesByServer = new WeakMap<ApiDeps, Map<string, PurgeRecord>>();

function purgesOf(deps: ApiDeps): Map<string, PurgeRecord> {
  let purges = purgesByServer.get(deps);
  if (purges === undefined) purgesByServer.set(deps, (purges = new Map()));
  return purges;
}

/**
 * Deletes every message of the queue, in every state (a lease in flight becomes stale), that was
 * sent before the purge began: the cut is the cell's last message when its first slice runs, so a
 * send that commits after is kept. Answers once the purge is done.
 */
async function purge(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const body = objectBody(ctx.body);
  for (const name of Object.keys(body)) {
    if (name !== "delete_messages_permanently") {
      throw new CloudflareError(400, queueCodes.bodyInvalid, `${name} is not a field of a purge; it takes delete_messages_permanently`);
    }
  }
  if (body["delete_messages_permanently"] !== true) {
    throw new CloudflareError(400, queueCodes.bodyInvalid, "a purge deletes the messages for good: send delete_messages_permanently: true");
  }
  const record: PurgeRecord = { startedAt: ctx.deps.clock.now(), completed: false };
  purgesOf(ctx.deps).set(row.queueId, record);
  return ctx.deps.directory.withCell(row.name, async (cell, current) => {
    await cell.purge("all");
    record.completed = true;
    return { result: queueJson(ctx, current, cell) };
  });
}

async function purgeStatus(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const record = purgesOf(ctx.deps).get(row.queueId);
  if (record === undefined) return { result: { completed: "true" } };
  return { result: { completed: String(record.completed), started_at: new Date(record.startedAt).toISOString() } };
}
