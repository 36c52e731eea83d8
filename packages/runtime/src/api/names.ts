import { createHash } from "node:crypto";
import { newQueueId, type UlidSource } from "@celld/queue-cell";
import { apiLimits } from "./api-limits.ts";
import { ApiError } from "../wire/api-error.ts";
import { describe } from "./fields.ts";

/**
 * Resource names: `orgs/{org}/projects/{project}/envs/{env}` is an environment, and queues and
 * subscriptions live under it. The full name of an API queue is also its cell's name.
 */
const segment = new RegExp(`^[A-Za-z0-9][A-Za-z0-9_-]{0,${apiLimits.nameSegmentCharsMax - 1}}$`);
const segmentBound = `1 to ${apiLimits.nameSegmentCharsMax} characters: letters, digits, "-" and "_", starting with a letter or digit`;
const envPattern = /^orgs\/([^/]+)\/projects\/([^/]+)\/envs\/([^/]+)$/;
/** Message ids are the cell's ULIDs: 26 Crockford base32 characters. */
const messageIdPattern = /^[0-9A-HJKMNP-TV-Z]{26}$/;
export const messageIdBound = "a 26-character message id";

export function checkSegment(field: string, value: unknown): string {
  if (typeof value !== "string" || !segment.test(value)) {
    throw new ApiError("invalid_argument", `${field} must be ${segmentBound}, got ${describe(value)}`, {
      field,
      bound: segmentBound,
    });
  }
  return value;
}

export function envName(org: string, project: string, env: string): string {
  return `orgs/${org}/projects/${project}/envs/${env}`;
}

/** Checks `orgs/{org}/projects/{project}/envs/{env}`; returns it unchanged. */
export function checkEnvName(field: string, value: unknown): string {
  const match = typeof value === "string" ? envPattern.exec(value) : null;
  if (match === null) {
    throw new ApiError(
      "invalid_argument",
      `${field} must be an environment name orgs/{org}/projects/{project}/envs/{env}, got ${describe(value)}`,
      { field, bound: "orgs/{org}/projects/{project}/envs/{env}" },
    );
  }
  checkSegment(`${field} (org)`, match[1]);
  checkSegment(`${field} (project)`, match[2]);
  checkSegment(`${field} (env)`, match[3]);
  return value as string;
}

export function childName(env: string, collection: "queues" | "subscriptions", id: string): string {
  return `${env}/${collection}/${id}`;
}

/** The last segment of a queue or subscription name. */
export function shortId(name: string): string {
  return name.slice(name.lastIndexOf("/") + 1);
}

/**
 * A queue named in a body (`dead_letter_queue`, a subscription's `queue`): its short id or its full
 * name, always inside `env`, so a key can never point a queue of its environment at another's.
 */
export function resolveQueueRef(env: string, field: string, value: unknown): string {
  if (typeof value === "string" && value.includes("/")) {
    const prefix = `${env}/queues/`;
    if (!value.startsWith(prefix)) {
      throw new ApiError("invalid_argument", `${field} must name a queue of ${env}, got ${describe(value)}`, {
        field,
        bound: `a queue id, or a name starting ${prefix}`,
      });
    }
    return childName(env, "queues", checkSegment(field, value.slice(prefix.length)));
  }
  return childName(env, "queues", checkSegment(field, value));
}

export function checkMessageId(field: string, value: unknown): string {
  if (typeof value !== "string" || !messageIdPattern.test(value)) {
    throw new ApiError("invalid_argument", `${field} must be a message id (26 characters, as returned by send), got ${describe(value)}`, {
      field,
      bound: messageIdBound,
    });
  }
  return value;
}

/**
 * `que_<cell><ulid>`: the cell code is six base32 characters of a hash of the cell's name, so an
 * id says which cell holds its queue without a lookup table.
 */
export function queueIdFor(cellName: string, ids: UlidSource, nowMs: number): string {
  const digest = createHash("sha256").update(cellName).digest();
  const alphabet = "0123456789abcdefghjkmnpqrstvwxyz";
  let code = "";
  for (let i = 0; i < 6; i++) code += alphabet[digest[i]! & 31];
  return newQueueId(code, ids, nowMs);
}

export function subscriptionIdFor(ids: UlidSource, nowMs: number): string {
  return `sub_${ids.next(nowMs)}`;
}
