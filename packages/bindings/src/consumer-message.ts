import type { LeasedMessage } from "@celld/queue-cell";

/** A message as Fetcher.queue() takes it: a decoded body, or v8 bytes for workerd to deserialize. */
export type ConsumerMessage = {
  id: string;
  timestamp: Date;
  attempts: number;
} & ({ body: unknown } | { serializedBody: Uint8Array });

const utf8 = new TextDecoder("utf-8", { fatal: false });

/**
 * Decodes a stored body by the content type it was sent with. v8 stays as bytes: only workerd can
 * deserialize what workerd serialized (Node's v8 module writes some types differently).
 */
export function toConsumerMessage(message: LeasedMessage): ConsumerMessage {
  const base = { id: message.id, timestamp: new Date(message.sentAt), attempts: message.deliveries };
  switch (message.contentType) {
    case "v8":
      return { ...base, serializedBody: exactCopy(message.body) };
    case "text":
      return { ...base, body: utf8.decode(message.body) };
    case "json":
      return { ...base, body: parseJson(message.body) };
    default:
      // bytes, and any other label (a native API event with binary data): an ArrayBuffer, as
      // Cloudflare delivers a bytes message.
      return { ...base, body: exactCopy(message.body).buffer };
  }
}

function parseJson(body: Uint8Array): unknown {
  const text = utf8.decode(body);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Stored bytes that are not JSON (written outside the binding): hand over the text rather
    // than fail the whole batch on one message.
    return text;
  }
}

/** A Uint8Array that owns exactly its bytes (a view into a pooled buffer would carry the rest). */
function exactCopy(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}
