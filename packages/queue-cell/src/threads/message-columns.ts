import type { OutgoingMessage } from "../send-input.ts";

/**
 * A send's messages as they cross to a cell thread: every body copied into one buffer, content
 * types in one array. A structured clone of 100 objects each holding its own Uint8Array cost
 * 185 µs here (each body a buffer of its own to serialize and to rebuild); these columns, 34 µs.
 */
export interface MessageColumns {
  columns: true;
  bytes: Uint8Array;
  /** Where each body ends in `bytes`. */
  ends: Uint32Array;
  contentTypes: string[];
  /** Each message's other fields, when any message has one; else undefined. */
  extras: Array<Pick<OutgoingMessage, "delaySeconds" | "attributes" | "sentAt">> | undefined;
}

/**
 * The columns of `messages`, or undefined when any is not what a send takes (not an array, a body
 * not bytes, a content type not a string): those cross as they are, for the cell to refuse with
 * its own words, as a cell on this thread would.
 */
export function toColumns(messages: readonly OutgoingMessage[]): MessageColumns | undefined {
  if (!Array.isArray(messages)) return undefined;
  let total = 0;
  let extras = false;
  for (const m of messages as unknown[]) {
    if (typeof m !== "object" || m === null) return undefined;
    const { body, contentType, delaySeconds, attributes, sentAt } = m as OutgoingMessage;
    if (!(body instanceof Uint8Array) || typeof contentType !== "string") return undefined;
    total += body.byteLength;
    if (delaySeconds !== undefined || attributes !== undefined || sentAt !== undefined) extras = true;
  }
  const bytes = new Uint8Array(total);
  const ends = new Uint32Array(messages.length);
  const contentTypes: string[] = [];
  let at = 0;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    bytes.set(m.body, at);
    at += m.body.byteLength;
    ends[i] = at;
    contentTypes.push(m.contentType);
  }
  return {
    columns: true,
    bytes,
    ends,
    contentTypes,
    extras: extras ? messages.map(({ delaySeconds, attributes, sentAt }) => ({ delaySeconds, attributes, sentAt })) : undefined,
  };
}

/** The messages again, each body a Buffer view of the one buffer (nothing copied). */
export function fromColumns(columns: MessageColumns): OutgoingMessage[] {
  const { bytes, ends, contentTypes, extras } = columns;
  const messages: OutgoingMessage[] = [];
  let start = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i]!;
    const body = Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start);
    const extra = extras?.[i];
    messages.push(extra === undefined ? { body, contentType: contentTypes[i]! } : { body, contentType: contentTypes[i]!, ...definedOf(extra) });
    start = end;
  }
  return messages;
}

export function isColumns(value: unknown): value is MessageColumns {
  return typeof value === "object" && value !== null && (value as { columns?: unknown }).columns === true;
}

function definedOf(extra: Pick<OutgoingMessage, "delaySeconds" | "attributes" | "sentAt">): Partial<OutgoingMessage> {
  const out: Partial<OutgoingMessage> = {};
  if (extra.delaySeconds !== undefined) out.delaySeconds = extra.delaySeconds;
  if (extra.attributes !== undefined) out.attributes = extra.attributes;
  if (extra.sentAt !== undefined) out.sentAt = extra.sentAt;
  return out;
}
