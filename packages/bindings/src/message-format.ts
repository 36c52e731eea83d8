import { ProtocolError } from "./cloudflare-errors.ts";

/** The content types workerd's queue binding sends; the cell stores one as a message's contentType. */
export const messageFormats = ["v8", "json", "text", "bytes"] as const;

export type MessageFormat = (typeof messageFormats)[number];

/**
 * workerd sends no format for v8 (its default before the `queues_json_messages` date, 2024-03-18)
 * and lower-cases the rest; Cloudflare accepts any case, so this does too. `field` names the value
 * in the error, or gives the name when asked (a sendBatch's names would be built for every message).
 */
export function parseMessageFormat(raw: unknown, field: string | (() => string)): MessageFormat {
  if (raw === undefined) return "v8";
  const lower = typeof raw === "string" ? raw.toLowerCase() : undefined;
  const format = messageFormats.find((f) => f === lower);
  if (format === undefined) {
    const shown = typeof raw === "string" ? JSON.stringify(raw) : typeof raw;
    const name = typeof field === "string" ? field : field();
    throw new ProtocolError("ERR_CONTENT_TYPE", `${name} must be one of ${messageFormats.join(", ")}; got ${shown}`);
  }
  return format;
}
