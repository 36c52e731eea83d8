import type { OutgoingMessage } from "@celld/queue-cell";
import { ProtocolError } from "./cloudflare-errors.ts";
import { checkJsonBody, parseMessageFormat } from "./message-format.ts";

/**
 * Reads the body workerd's sendBatch() posts to /batch:
 * `{"messages":[{"body":"<base64>","contentType"?:"v8|json|text|bytes","delaySecs"?:n}]}`.
 * Only the shape is checked here; counts, sizes and delays are the cell's to judge, on the
 * decoded bodies.
 */
export function parseBatchRequest(text: string): OutgoingMessage[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ProtocolError("ERR_JSON_MALFORMED", `the batch request is not JSON: ${(error as Error).message}`);
  }
  const messages = isRecord(parsed) ? parsed["messages"] : undefined;
  if (!Array.isArray(messages)) {
    throw new ProtocolError("ERR_JSON_INVALID", `the batch request must be {"messages":[...]}`);
  }
  // Every body into one buffer of this request's own (Buffer.from() would hand out views into a
  // pool shared with other requests, and a copy each to avoid that cost a microsecond a message).
  // Each message's field name is spelled out only for an error: built for every message of every
  // call, the names cost more than the checks.
  let total = 0;
  for (let i = 0; i < messages.length; i++) {
    const entry: unknown = messages[i];
    if (!isRecord(entry)) throw new ProtocolError("ERR_JSON_INVALID", `messages[${i}] must be an object`);
    if (typeof entry["body"] !== "string") throw notBase64(`messages[${i}]`);
    total += Buffer.byteLength(entry["body"], "base64");
  }
  const out = Buffer.allocUnsafeSlow(total);
  const entries = messages as Array<Record<string, unknown> & { body: string }>;
  const result: OutgoingMessage[] = new Array(entries.length);
  let offset = 0;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    const written = out.write(entry.body, offset, "base64");
    // Canonical base64 only: the decoder skips characters it does not know and takes base64url
    // as well, so a damaged body would be stored as different bytes instead of being refused.
    // Encoding the bytes again must give back the very same text.
    if (out.toString("base64", offset, offset + written) !== entry.body) throw notBase64(`messages[${i}]`);
    const body = out.subarray(offset, offset + written);
    const contentType = parseMessageFormat(entry["contentType"], () => `messages[${i}].contentType`);
    checkJsonBody(contentType, body, () => `messages[${i}]`);
    const message: OutgoingMessage = { body, contentType };
    offset += written;
    // Passed on unchecked: the cell refuses a delay that is not a whole number in range, and
    // names this field when it does.
    if (entry["delaySecs"] !== undefined) message.delaySeconds = entry["delaySecs"] as number;
    result[i] = message;
  }
  return result;
}

function notBase64(field: string): ProtocolError {
  return new ProtocolError("ERR_JSON_INVALID", `${field}.body must be a base64 string`);
}

/**
 * A copy that owns exactly its bytes. A small Buffer is a view into a shared pool; anything that
 * later takes `.buffer` would see other requests' data.
 */
export function exactBytes(view: Uint8Array): Uint8Array {
  const copy = new Uint8Array(view.byteLength);
  copy.set(view);
  return copy;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
