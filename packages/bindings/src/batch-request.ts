import type { OutgoingMessage } from "@celld/queue-cell";
import { ProtocolError } from "./cloudflare-errors.ts";
import { parseMessageFormat } from "./message-format.ts";

// Canonical base64 only: Buffer.from(s, "base64") skips characters it does not know, so a
// damaged body would be stored as different bytes instead of being refused.
const base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

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
  return messages.map((entry: unknown, i) => {
    const field = `messages[${i}]`;
    if (!isRecord(entry)) throw new ProtocolError("ERR_JSON_INVALID", `${field} must be an object`);
    const body = entry["body"];
    if (typeof body !== "string" || !base64Pattern.test(body)) {
      throw new ProtocolError("ERR_JSON_INVALID", `${field}.body must be a base64 string`);
    }
    const message: OutgoingMessage = {
      body: exactBytes(Buffer.from(body, "base64")),
      contentType: parseMessageFormat(entry["contentType"], `${field}.contentType`),
    };
    // Passed on unchecked: the cell refuses a delay that is not a whole number in range, and
    // names this field when it does.
    if (entry["delaySecs"] !== undefined) message.delaySeconds = entry["delaySecs"] as number;
    return message;
  });
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
