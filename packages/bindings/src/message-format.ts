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

// What workerd sends as a json body when JSON.stringify() returns undefined (a function, a Symbol,
// an object whose toJSON() returns undefined): the text "undefined", the one body its json
// encoding can produce that is not JSON. Compared byte by byte, so that checking costs nothing on
// ordinary bodies (parsing every json body would cost a parse per message).
const notJsonBody = new TextEncoder().encode("undefined");

/**
 * Refuses a json body that is not JSON. Stored, it would reach the consumer as the string
 * "undefined" (a json body that does not parse is handed over as its text), where Cloudflare's
 * consumer fails to parse it on every delivery; refused, the Worker learns at send(), where the
 * mistake is. `field` is the message's name in the error.
 */
export function checkJsonBody(format: MessageFormat, body: Uint8Array, field: string | (() => string)): void {
  if (format !== "json" || body.byteLength !== notJsonBody.byteLength) return;
  for (let i = 0; i < body.byteLength; i++) if (body[i] !== notJsonBody[i]) return;
  const name = typeof field === "string" ? field : field();
  throw new ProtocolError(
    "ERR_BODY_NOT_JSON",
    `${name} has contentType json but its body is not JSON: JSON.stringify() gave undefined ` +
      "(a function, a Symbol, or a toJSON() that returns undefined); send a value JSON can represent",
  );
}
