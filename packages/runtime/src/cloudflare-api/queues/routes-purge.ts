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

/**
 * Deletes every message of the queue, in every state (a lease in flight becomes stale), that was
 * sent before the purge began: the cut is the cell's last message when it begins (purgeCut), so a
 * send that commits after is kept. Answers once the purge is done; its status is kept in the
 * catalog, across restarts.
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
  return ctx.deps.directory.withCell(row.name, async (cell, current) => {
    const cut = await cell.purgeCut();
    const record = { queue: row.name, startedMs: ctx.deps.clock.now(), seqAtMost: cut.seqAtMost };
    // Recorded before the first slice: a stop during the purge leaves it to finish at the next start.
    ctx.deps.catalog.startPurge(record);
    await cell.purge("all", cut);
    ctx.deps.catalog.completePurge(record, ctx.deps.clock.now());
    return { result: queueJson(ctx, current, cell) };
  });
}

async function purgeStatus(ctx: CloudflareContext): Promise<CloudflareReply> {
  const row = queueOf(ctx);
  const record = ctx.deps.catalog.purgeOf(row.name);
  if (record === undefined) return { result: { completed: "true" } };
  return { result: { completed: String(record.completedMs !== null), started_at: new Date(record.startedMs).toISOString() } };
}

/**
 * Finishes the purges a stop interrupted, each with its own cut (nothing sent after it began is
 * deleted), and marks them completed; run once as the API starts. A queue deleted since has no
 * record left (Catalog.deleteQueue).
 */
export async function finishInterruptedPurges(deps: ApiDeps): Promise<void> {
  for (const record of deps.catalog.unfinishedPurges()) {
    await deps.directory.withCell(record.queue, (cell) => cell.purge("all", { seqAtMost: record.seqAtMost }));
    deps.catalog.completePurge(record, deps.clock.now());
  }
}
