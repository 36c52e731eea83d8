import { CloudflareError } from "../cloudflare-errors.ts";
import { queueCodes } from "./queue-lookup.ts";

/**
 * A pull's `lease_id`: the queue, the message and the lease generation it was handed out under,
 * so an ack or retry is fenced as the native API's is (a lease that is no longer current is not
 * applied) and a lease of another queue is refused. Opaque to clients, as Cloudflare's are.
 */
export interface LeaseRef {
  queueId: string;
  messageId: string;
  leaseGeneration: number;
}

const prefix = "cl1";

export function leaseIdOf(ref: LeaseRef): string {
  return `${prefix}.${Buffer.from(`${ref.queueId}.${ref.messageId}.${ref.leaseGeneration}`).toString("base64url")}`;
}

/** The lease a `lease_id` names, which must be of `queueId`; `field` names it in the refusal. */
export function readLeaseId(value: unknown, queueId: string, field: string): LeaseRef {
  const ref = typeof value === "string" ? decode(value) : undefined;
  if (ref === undefined) {
    throw new CloudflareError(400, queueCodes.bodyInvalid, `${field} is not a lease_id a pull of this queue answered: ${JSON.stringify(value)}`);
  }
  if (ref.queueId !== queueId) {
    throw new CloudflareError(400, queueCodes.bodyInvalid, `${field} is a lease of another queue (${ref.queueId}), not of ${queueId}`);
  }
  return ref;
}

function decode(value: string): LeaseRef | undefined {
  if (value.length > 200 || !value.startsWith(`${prefix}.`)) return undefined;
  const text = Buffer.from(value.slice(prefix.length + 1), "base64url").toString("utf8");
  const match = /^(que_[0-9a-z]{6}[0-9A-Z]{26})\.([0-9A-Z]{26})\.([1-9][0-9]{0,15})$/.exec(text);
  if (match === null) return undefined;
  const leaseGeneration = Number(match[3]);
  if (!Number.isSafeInteger(leaseGeneration)) return undefined;
  return { queueId: match[1]!, messageId: match[2]!, leaseGeneration };
}
