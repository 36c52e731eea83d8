// Runs in Node (the host encodes) and inside workerd (the queue dispatch Worker decodes), so it
// imports nothing but types and ulid-text (which imports nothing): both ends read the frame
// through this one file.
import { isUlidRun, ulidRun } from "@celld/queue-cell/ulid-text";
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
 * or, when the messages share timestamp, attempts and content type and each id is the one after
 * the id before it (ulidSuccessor), as a send's messages leased together are, a run in place of
 * "messages", with the ids left to be derived again:
 *
 *             "run":{"first":"…","timestamp":ms,"attempts":n,"contentType":"json","lengths":[n,…]}
 *
 * A list of 100 ids was most of the header, and the largest share of the work of encoding and
 * decoding a batch.
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

/**
 * The dispatch Worker runs whatever batch a request carries, and Miniflare's entry socket (loopback
 * TCP, open to every local process) routes any request naming it in MF-Route-Override to it, past
 * the private Unix socket the host uses. So each request carries a key the host made at start and
 * gave the Worker as the text binding `dispatchKeyBinding`; a request without it is refused.
 */
export const dispatchKeyHeader = "x-celld-dispatch-key";
export const dispatchKeyBinding = "CELLD_DISPATCH_KEY";

/** A frame that breaks the format: refused by the encoder (a host bug) and by the decoder. */
export class BatchFrameError extends Error {
  override readonly name = "BatchFrameError";
}

interface WireHeader {
  binding: string;
  queue: string;
  metrics: { backlogCount: number; backlogBytes: number; oldestMessageTimestamp?: number };
  /** Exactly one of messages and run. */
  messages?: WireMessage[];
  run?: WireRun;
}

interface WireRun {
  first: string;
  timestamp: number;
  attempts: number;
  contentType: string;
  lengths: number[];
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
    ...(isRun(frame.messages)
      ? { run: runOf(frame.messages) }
      : {
          messages: frame.messages.map((m) => ({
            id: m.id,
            timestamp: m.sentAt,
            attempts: m.deliveries,
            contentType: m.contentType,
            length: m.body.byteLength,
          })),
        }),
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
  const wireMessages = header.run === undefined ? header.messages! : fromRun(header.run);
  const bodiesLength = wireMessages.reduce((sum, m) => sum + m.length, 0);
  if (bodiesStart + bodiesLength !== bytes.byteLength) {
    fail(`the bodies are ${bytes.byteLength - bodiesStart} bytes; the header accounts for ${bodiesLength}`);
  }
  let offset = bodiesStart;
  const messages = wireMessages.map((m): BatchMessage => {
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
  if (header["run"] !== undefined) {
    if (header["messages"] !== undefined) fail("a header carries messages or a run, not both");
    checkRun(header["run"]);
    return value as WireHeader;
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

function checkRun(value: unknown): void {
  const run = record(value, "run");
  text(run["first"], "run.first");
  whole(run["timestamp"], "run.timestamp", 0);
  whole(run["attempts"], "run.attempts", 1);
  text(run["contentType"], "run.contentType");
  const lengths = run["lengths"];
  if (!Array.isArray(lengths) || lengths.length === 0) fail("run.lengths must be a non-empty array");
  for (let i = 0; i < lengths.length; i++) {
    if (!isWhole(lengths[i], 0)) badWhole(lengths[i], `run.lengths[${i}]`, 0);
  }
}

/** Whether messages may travel as a run: two or more, alike but for ids that follow one another. */
function isRun(messages: readonly BatchMessage[]): boolean {
  return (
    messages.length >= 2 &&
    isUlidRun(messages, (m, first) => m.sentAt === first.sentAt && m.deliveries === first.deliveries && m.contentType === first.contentType)
  );
}

function runOf(messages: readonly BatchMessage[]): WireRun {
  const first = messages[0]!;
  return {
    first: first.id,
    timestamp: first.sentAt,
    attempts: first.deliveries,
    contentType: first.contentType,
    lengths: messages.map((m) => m.body.byteLength),
  };
}

/** A run's messages, each id derived from the one before. */
function fromRun(run: WireRun): WireMessage[] {
  const ids = ulidRun(run.first, run.lengths.length);
  if (ids.length < run.lengths.length) {
    fail(`run.first ${show(run.first)} has no id after it for message ${ids.length}: a run's ids are ULIDs one after another`);
  }
  return ids.map((id, i) => ({ id, timestamp: run.timestamp, attempts: run.attempts, contentType: run.contentType, length: run.lengths[i]! }));
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
