import { apiLimits } from "./api-limits.ts";
import { eventFromStored, eventToJsonText } from "./cloudevents.ts";
import { withMember } from "../wire/json-source.ts";
import { pageTokenAfter, readSeqPage } from "./paging.ts";
import { queueNameOf } from "./routes-queues.ts";
import type { Reply, Route, RouteContext } from "./router.ts";
import { formatMs } from "../wire/timestamps.ts";

/**
 * A look at a queue's messages waiting to be leased (ready now or delayed), oldest first, without
 * leasing them: no delivery is counted and no lease taken (the dashboard's "browse"). It shows
 * message data, so like the dead-letter list it needs events:write, not events:read.
 */
const item = "/v1/orgs/{org}/projects/{project}/envs/{env}/queues/{queue}";

export const peekRoutes: Route[] = [
  {
    method: "GET",
    path: `${item}/messages`,
    scope: "events:write",
    body: "none",
    query: ["page_size", "page_token"],
    largeAnswer: "withdrawable",
    handle: peekMessages,
  },
];

async function peekMessages(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const { page, afterSeq } = readSeqPage(ctx.query, apiLimits.deadLetterPageSizeDefault, apiLimits.deadLetterPageSizeMax);
  return ctx.deps.directory.withCell(name, async (cell, row) => {
    const nowMs = cell.now();
    const waiting = await cell.peekReady({ afterSeq, limit: page.size + 1 });
    const shown = waiting.slice(0, page.size);
    const source = `/${row.name}`;
    const items = shown.map((m) => {
      const fields = JSON.stringify({
        id: m.id,
        state: m.availableAt > nowMs ? "delayed" : "ready",
        available_time: formatMs(m.availableAt),
        delivery_count: m.deliveries,
        send_time: formatMs(m.sentAt),
        content_type: m.contentType,
      });
      return withMember(fields, "event", eventToJsonText(eventFromStored(m, source)));
    });
    const list = `{"messages":[${items.join(",")}]}`;
    if (waiting.length <= page.size) return { jsonText: list };
    return { jsonText: withMember(list, "next_page_token", JSON.stringify(pageTokenAfter(String(shown[shown.length - 1]!.seq)))) };
  });
}
