// Runs in Node (the host encodes) and inside workerd (the queue dispatch Worker decodes), so it
// imports nothing but types: both ends read the frame through this one file.
import type { BatchMessage, BatchMetadata } from "./consumer-message.ts";

/**
 * One consumer batch as the host POSTs it to the queue dispatch Worker:
 *
 *   [u32, big-endian: header length in bytes][header: UTF-8 JSON][the bodies, end to end, in order]
 *
 *   header = {"binding":"CONSUMER_0","queue":"jobs",
 *             "metrics":{"backlogCount":n,"backlogBytes":n,"oldestMessageTimestamp"?:ms},
 *             "messages":[{"id":"…","timestamp":ms,"attempts":n,"contentType":"json","length":n},…]}
 *
 * Bodies travel as the cell stored them, with no base64 and no structured clone on the way: the
 * Worker decodes each by its content type with toConsumerMessage, as workerd's own broker would.
 */
export interface BatchFrame {
  /** The dispatch Worker's service binding to the consumer Worker. */
  binding: string;
  queue: string;
  metadata: BatchMetadata;
  messages: readonly BatchMessage[];
}

/** A frame that breaks the format: refused by the encoder (a host bug) and by the decoder. */
export class BatchFrameError extends Error {
  override readonly name = "BatchFrameError";
}

interface WireHeader {
  binding: string;
  queue: string;
  metrics: { backlogCount: number; backlogBytes: number; oldestMessageTimestamp?: number };
  messages: WireMessage[];
}

interface WireMessage {
  id: string;
  timestamp: number;
  attempts: number;
  contentType: string;
  length: number;
}

const prefixBytes = 4;
const utf8Encoder = new TextEncoder();
// Fatal: a header that is not UTF-8 is a broken frame, not text to guess at.
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

export function encodeBatch(frame: BatchFrame): Uint8Array {
  const oldest = frame.metadata.metrics.oldestMessageTimestamp;
  const header: WireHeader = {
    binding: frame.binding,
    queue: frame.queue,
    metrics: {
      backlogCount: frame.metadata.metrics.backlogCount,
      backlogBytes: frame.metadata.metrics.backlogBytes,
      ...(oldest === undefined ? {} : { oldestMessageTimestamp: oldest.getTime() }),
    },
    messages: frame.messages.map((m) => ({
      id: m.id,
      timestamp: m.sentAt,
      attempts: m.deliveries,
      contentType: m.contentType,
      length: m.body.byteLength,
    })),
  };
  // The same checks the decoder makes: whatever is encoded decodes, and a bad value is caught
  // here, naming its field, rather than as a 400 from the Worker.
  checkHeader(header);
  const headerBytes = utf8Encoder.encode(JSON.stringify(header));
  let total = prefixBytes + headerBytes.byteLength;
  for (const m of frame.messages) total += m.body.byteLength;
  const out = new Uint8Array(total);
  new DataView(out.buffer).setUint32(0, headerBytes.byteLength);
  out.set(headerBytes, prefixBytes);
  let offset = prefixBytes + headerBytes.byteLength;
  for (const m of frame.messages) {
    out.set(m.body, offset);
    offset += m.body.byteLength;
  }
  return out;
}

/** Reads a frame. Bodies are views into `bytes`; toConsumerMessage copies what it keeps. */
export function decodeBatch(bytes: Uint8Array): BatchFrame {
  if (bytes.byteLength < prefixBytes) fail(`${bytes.byteLength} bytes, too short for the ${prefixBytes}-byte header length`);
  const headerLength = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  const bodiesStart = prefixBytes + headerLength;
  if (bodiesStart > bytes.byteLength) {
    fail(`the header length says ${headerLength} bytes but ${bytes.byteLength - prefixBytes} follow`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8Decoder.decode(bytes.subarray(prefixBytes, bodiesStart)));
  } catch (error) {
    fail(`the header is not UTF-8 JSON: ${(error as Error).message}`);
  }
  const header = checkHeader(parsed);
  const bodiesLength = header.messages.reduce((sum, m) => sum + m.length, 0);
  if (bodiesStart + bodiesLength !== bytes.byteLength) {
    fail(`the bodies are ${bytes.byteLength - bodiesStart} bytes; the header accounts for ${bodiesLength}`);
  }
  let offset = bodiesStart;
  const messages = header.messages.map((m): BatchMessage => {
    const body = bytes.subarray(offset, offset + m.length);
    offset += m.length;
    return { id: m.id, sentAt: m.timestamp, deliveries: m.attempts, contentType: m.contentType, body };
  });
  const { backlogCount, backlogBytes, oldestMessageTimestamp } = header.metrics;
  return {
    binding: header.binding,
    queue: header.queue,
    metadata: {
      metrics: {
        backlogCount,
        backlogBytes,
        ...(oldestMessageTimestamp === undefined ? {} : { oldestMessageTimestamp: new Date(oldestMessageTimestamp) }),
      },
    },
    messages,
  };
}

function checkHeader(value: unknown): WireHeader {
  const header = record(value, "header");
  text(header["binding"], "binding");
  text(header["queue"], "queue");
  const metrics = record(header["metrics"], "metrics");
  whole(metrics["backlogCount"], "metrics.backlogCount", 0);
  whole(metrics["backlogBytes"], "metrics.backlogBytes", 0);
  if (metrics["oldestMessageTimestamp"] !== undefined) {
    whole(metrics["oldestMessageTimestamp"], "metrics.oldestMessageTimestamp", 0);
  }
  const messages = header["messages"];
  // The dispatcher never sends an empty batch, and Cloudflare never runs queue() with none.
  if (!Array.isArray(messages) || messages.length === 0) fail("messages must be a non-empty array");
  // Each field's name is spelled out only for a failure: built for every message of every batch,
  // the names cost more than the checks.
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (typeof m !== "object" || m === null || Array.isArray(m)) fail(`messages[${i}] must be an object`);
    const entry = m as Record<string, unknown>;
    if (!isText(entry["id"])) badText(entry["id"], `messages[${i}].id`);
    if (!isWhole(entry["timestamp"], 0)) badWhole(entry["timestamp"], `messages[${i}].timestamp`, 0);
    if (!isWhole(entry["attempts"], 1)) badWhole(entry["attempts"], `messages[${i}].attempts`, 1);
    if (!isText(entry["contentType"])) badText(entry["contentType"], `messages[${i}].contentType`);
    if (!isWhole(entry["length"], 0)) badWhole(entry["length"], `messages[${i}].length`, 0);
  }
  return value as WireHeader;
}

function record(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`${field} must be an object`);
  return value as Record<string, unknown>;
}

function text(value: unknown, field: string): void {
  if (!isText(value)) badText(value, field);
}

function whole(value: unknown, field: string, min: number): void {
  if (!isWhole(value, min)) badWhole(value, field, min);
}

function isText(value: unknown): boolean {
  return typeof value === "string" && value.length > 0;
}

function isWhole(value: unknown, min: number): boolean {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= min;
}

function badText(value: unknown, field: string): never {
  fail(`${field} must be a non-empty string, got ${show(value)}`);
}

function badWhole(value: unknown, field: string, min: number): never {
  fail(`${field} must be a whole number from ${min}, got ${show(value)}`);
}

function show(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

function fail(problem: string): never {
  throw new BatchFrameError(`batch frame: ${problem}`);
}
