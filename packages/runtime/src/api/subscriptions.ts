import type { OutgoingMessage } from "@celld/queue-cell";
import { apiLimits } from "./api-limits.ts";
import type { Catalog, SubscriptionRow } from "./catalog.ts";
import type { EventEnvelope } from "../wire/event-envelope.ts";
import { ApiError } from "../wire/api-error.ts";
import { toApiError } from "./errors.ts";
import { checkArray, checkString, readObject } from "./fields.ts";
import { fieldPath } from "../wire/json-text.ts";
import type { QueueDirectory } from "./queue-directory.ts";

/**
 * Subscriptions route an environment's published events into queues by `type` and `source`.
 * A filter list holds exact values or prefixes ending in `*`; an empty or absent list matches
 * every value. An event goes to each matching queue once, however many of that queue's
 * subscriptions match it.
 */
export interface EventFilter {
  types: string[];
  sources: string[];
}

const filterFields: ReadonlySet<string> = new Set(["types", "sources"]);
const patternBound = `1 to ${apiLimits.eventAttributeCharsMax} characters; "*" only at the end`;

export function readFilter(value: unknown, field: string): EventFilter {
  if (value === undefined) return { types: [], sources: [] };
  const obj = readObject(value, field, filterFields);
  return {
    types: readPatterns(obj["types"], fieldPath(field, "types")),
    sources: readPatterns(obj["sources"], fieldPath(field, "sources")),
  };
}

function readPatterns(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  const list = checkArray(field, value, 0, apiLimits.subscriptionPatternsMax, "patterns");
  return list.map((item, i) => {
    const pattern = checkString(`${field}[${i}]`, item, apiLimits.eventAttributeCharsMax);
    if (pattern.slice(0, -1).includes("*")) {
      throw new ApiError("invalid_argument", `${field}[${i}] may hold "*" only as its last character`, {
        field: `${field}[${i}]`,
        bound: patternBound,
      });
    }
    return pattern;
  });
}

function matchesOne(patterns: readonly string[], value: string): boolean {
  if (patterns.length === 0) return true;
  return patterns.some((p) => (p.endsWith("*") ? value.startsWith(p.slice(0, -1)) : value === p));
}

export function matches(filter: EventFilter, event: EventEnvelope): boolean {
  return matchesOne(filter.types, String(event.attributes["type"])) && matchesOne(filter.sources, String(event.attributes["source"]));
}

/** For each queue, the indexes of the events routed to it, in event order. */
export function route(subscriptions: readonly SubscriptionRow[], events: readonly EventEnvelope[]): Map<string, number[]> {
  const routed = new Map<string, Set<number>>();
  for (const sub of subscriptions) {
    events.forEach((event, i) => {
      if (!matches(sub, event)) return;
      let set = routed.get(sub.queue);
      if (set === undefined) routed.set(sub.queue, (set = new Set()));
      set.add(i);
    });
  }
  return new Map([...routed].map(([queue, set]) => [queue, [...set].sort((a, b) => a - b)]));
}

export interface Delivery {
  queue: string;
  messageId: string;
}

/**
 * Sends each event into every queue it is routed to. Queues commit independently: when one
 * fails, the error lists the queues that did commit, so a retry can be told apart from a loss
 * (a retried publish delivers again to those; consumers dedupe on the event's source and id).
 */
export async function publish(
  catalog: Catalog,
  directory: QueueDirectory,
  env: string,
  events: readonly EventEnvelope[],
  messages: readonly OutgoingMessage[],
): Promise<Delivery[][]> {
  const routed = route(catalog.envSubscriptions(env), events);
  const queues = [...routed.keys()];
  const settled = await Promise.allSettled(
    queues.map((queue) => {
      const indexes = routed.get(queue)!;
      return directory.withCell(queue, (cell) => cell.send(indexes.map((i) => messages[i]!)));
    }),
  );
  const deliveries: Delivery[][] = events.map(() => []);
  let failure: ApiError | undefined;
  const failed: string[] = [];
  const reasons: unknown[] = [];
  settled.forEach((outcome, q) => {
    const queue = queues[q]!;
    if (outcome.status === "rejected") {
      failure ??= toApiError(outcome.reason);
      failed.push(queue);
      reasons.push(outcome.reason);
      return;
    }
    routed.get(queue)!.forEach((eventIndex, k) => deliveries[eventIndex]!.push({ queue, messageId: outcome.value.ids[k]! }));
  });
  if (failure !== undefined) {
    const committed = queues.filter((q) => !failed.includes(q));
    throw new ApiError(
      failure.code,
      `the events reached ${committed.length} of ${queues.length} queues; ${failed.join(", ")} refused them: ${failure.message}`,
      {
        field: failure.field,
        bound: failure.bound,
        extra: { committed_queues: committed, failed_queues: failed },
        retryAfterSeconds: failure.retryAfterSeconds,
        // Each queue's own refusal, for the server's log (a storage failure is logged per queue).
        cause: new AggregateError(reasons, `${failed.length} queue(s) refused the events`),
      },
    );
  }
  return deliveries;
}
