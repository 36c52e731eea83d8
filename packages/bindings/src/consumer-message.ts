// Runs in Node and inside workerd (the queue dispatch Worker bundles it), so it imports nothing:
// the decoding a consumer sees is this one function wherever it runs.

/** One message of a batch as the cell leased it (a `LeasedMessage` is one), not yet decoded. */
export interface BatchMessage {
  id: string;
  /** When it was first sent, in ms since the epoch. */
  sentAt: number;
  /** 1 on the first delivery. */
  deliveries: number;
  contentType: string;
  body: Uint8Array;
}

/** The metadata Fetcher.queue() takes beside a batch. */
export interface BatchMetadata {
  metrics: { backlogCount: number; backlogBytes: number; oldestMessageTimestamp?: Date };
}

/** A message as Fetcher.queue() takes it: a decoded body, or v8 bytes for workerd to deserialize. */
export type ConsumerMessage = {
  id: string;
  timestamp: Date;
  attempts: number;
} & ({ body: unknown } | { serializedBody: Uint8Array });

// A text body is handed over as it was sent, a leading byte-order mark included, as workerd's
// own queue consumer does (it builds the string from the bytes); ignoreBOM: true keeps it.
const utf8Text = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
// JSON.parse refuses a leading byte-order mark, which a json body sent by a binding never has;
// one written through the native API is dropped, as TextDecoder does by default.
const utf8Json = new TextDecoder("utf-8", { fatal: false, ignoreBOM: false });

/**
 * Decodes a stored body by the content type it was sent with. v8 stays as bytes: only workerd can
 * deserialize what workerd serialized (Node's v8 module writes some types differently).
 */
export function toConsumerMessage(message: BatchMessage): ConsumerMessage {
  const base = { id: message.id, timestamp: new Date(message.sentAt), attempts: message.deliveries };
  switch (message.contentType) {
    case "v8":
      return { ...base, serializedBody: exactCopy(message.body) };
    case "text":
      return { ...base, body: utf8Text.decode(message.body) };
    case "json":
      return { ...base, body: parseJson(message.body) };
    default:
      // bytes, and any other label (a native API event with binary data): an ArrayBuffer, as
      // Cloudflare delivers a bytes message.
      return { ...base, body: exactCopy(message.body).buffer };
  }
}

function parseJson(body: Uint8Array): unknown {
  const text = utf8Json.decode(body);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Stored bytes that are not JSON (written outside the binding): hand over the text rather
    // than fail the whole batch on one message.
    return text;
  }
}

/** A Uint8Array that owns exactly its bytes (a view into a larger buffer would carry the rest). */
function exactCopy(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}
