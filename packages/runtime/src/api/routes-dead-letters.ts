import { isCellError } from "@celld/queue-cell";
import { apiLimits } from "./api-limits.ts";
import { eventFromStored, eventToJsonText } from "./cloudevents.ts";
import { ApiError } from "../wire/api-error.ts";
import { describe, readObject, requiredMember } from "./fields.ts";
import { withMember } from "../wire/json-source.ts";
import { pageTokenAfter, readSeqPage } from "./paging.ts";
import { queueNameOf } from "./routes-queues.ts";
import type { Reply, Route, RouteContext } from "./router.ts";
import { formatMs, instantToMs, parseRfc3339 } from "../wire/timestamps.ts";

/**
 * A queue's dead-letter set: list it, replay it (all, or what was dead-lettered in a time range)
 * with a fresh delivery count, purge it. Listing shows message data, so it needs events:write
 * like leasing does, not events:read.
 */
const item = "/v1/orgs/{org}/projects/{project}/envs/{env}/queues/{queue}";

export const deadLetterRoutes: Route[] = [
  {
    method: "GET",
    path: `${item}/dead-letters`,
    scope: "events:write",
    body: "none",
    query: ["page_size", "page_token"],
    largeAnswer: "withdrawable",
    handle: listDeadLetters,
  },
  { method: "POST", path: `${item}:replay`, scope: "events:write", body: "control", handle: replay },
  { method: "POST", path: `${item}:purge`, scope: "events:write", body: "control", handle: purge },
];

const replayFields: ReadonlySet<string> = new Set(["from", "to"]);
const purgeFields: ReadonlySet<string> = new Set(["scope"]);
const purgeScopes = { dead_letters: "dead", all: "all" } as const;
const purgeScopeBound = '"dead_letters" or "all"';

async function listDeadLetters(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const { page, afterSeq } = readSeqPage(ctx.query, apiLimits.deadLetterPageSizeDefault, apiLimits.deadLetterPageSizeMax);
  return ctx.deps.directory.withCell(name, async (cell, row) => {
    const dead = await cell.listDead({ afterSeq, limit: page.size + 1 });
    const shown = dead.slice(0, page.size);
    const source = `/${row.name}`;
    const items = shown.map((m) => {
      const fields = JSON.stringify({
        id: m.id,
        dead_letter_time: formatMs(m.deadAt),
        delivery_count: m.deliveries,
        send_time: formatMs(m.sentAt),
      });
      return withMember(fields, "event", eventToJsonText(eventFromStored(m, source)));
    });
    const list = `{"dead_letters":[${items.join(",")}]}`;
    if (dead.length <= page.size) return { jsonText: list };
    return { jsonText: withMember(list, "next_page_token", JSON.stringify(pageTokenAfter(String(shown[shown.length - 1]!.seq)))) };
  });
}

async function replay(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const body = readObject(ctx.body, "", replayFields);
  const fromMs = readTime(body["from"], "from");
  const toMs = readTime(body["to"], "to");
  if (fromMs !== undefined && toMs !== undefined && toMs < fromMs) {
    throw new ApiError("out_of_range", `to (${String(body["to"])}) is before from (${String(body["from"])})`, {
      field: "to",
      bound: "at or after from",
    });
  }
  const result = await interruptible("replay", () => ctx.deps.directory.withCell(name, (cell) => cell.replay({ fromMs, toMs })));
  return { json: { replayed: result.replayed } };
}

async function purge(ctx: RouteContext): Promise<Reply> {
  const name = queueNameOf(ctx);
  const body = readObject(ctx.body, "", purgeFields);
  // No default: a purge that empties the whole queue must be asked for by name.
  const scope = requiredMember(body, "scope", "", purgeScopeBound, `: ${purgeScopeBound}`);
  if (scope !== "dead_letters" && scope !== "all") {
    throw new ApiError("invalid_argument", `scope must be ${purgeScopeBound}, got ${describe(scope)}`, {
      field: "scope",
      bound: purgeScopeBound,
    });
  }
  const result = await interruptible("purge", () => ctx.deps.directory.withCell(name, (cell) => cell.purge(purgeScopes[scope])));
  return { json: { purged: result.purged } };
}

/**
 * What a purge or a replay that found its queue closed part way (celld stopping) left behind. The
 * cell does either a group of 5,000 messages at a time, each committed on its own, so the groups
 * before the close stay done, and "nothing of this call was written", true of other calls, is not.
 * Both are safe to repeat: a purge deletes what is left; a replay changes each dead letter in place
 * to ready, so a repeat finds only those still dead and never makes a copy of one.
 */
const interruptedWords = {
  purge: "part of this purge may have been done (it deletes in groups, and the groups done stay deleted); repeating it is safe: it deletes what is left (with what has come into its scope since)",
  replay:
    "part of this replay may have been done (it returns dead letters to ready in groups, and the groups done stay replayed); repeating it is safe: " +
    "what was replayed is no longer a dead letter, so a repeat returns only what is still in the dead-letter set (with what has been dead-lettered in its range since), and no message is ever copied",
} as const;

async function interruptible<T>(what: keyof typeof interruptedWords, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (!isCellError(error, "ERR_CELL_CLOSED")) throw error;
    throw new ApiError("unavailable", `${error.message}; ${interruptedWords[what]}`, {
      cause: error,
      retryAfterSeconds: apiLimits.retryAfterSeconds,
    });
  }
}

/** The cell counts dead-letter times from the epoch; no message was dead-lettered before it. */
const replayTimeBound = "at or after 1970-01-01T00:00:00Z";

function readTime(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined;
  const instant = typeof value === "string" ? parseRfc3339(value) : undefined;
  if (instant === undefined) {
    throw new ApiError("invalid_argument", `${field} must be an RFC 3339 timestamp such as 2026-01-01T00:00:00Z, got ${describe(value)}`, {
      field,
      bound: `an RFC 3339 timestamp ${replayTimeBound}`,
    });
  }
  if (instant.seconds < 0) {
    // A valid timestamp, outside the range: say the range, not the format.
    throw new ApiError("out_of_range", `${field} must be ${replayTimeBound}, got ${value as string}`, {
      field,
      bound: replayTimeBound,
    });
  }
  return instantToMs(instant);
}
