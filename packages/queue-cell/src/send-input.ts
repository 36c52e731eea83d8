import { CellError, checkRange } from "./errors.ts";
import { limits } from "./limits.ts";

export interface OutgoingMessage {
  /** The encoded body; the cell stores it untouched. */
  body: Uint8Array;
  /** How the body is encoded: v8, json, text, bytes, or a CloudEvents datacontenttype. */
  contentType: string;
  /** Overrides the call's and the queue's delay. */
  delaySeconds?: number;
  /** Opaque metadata kept with the message (CloudEvent attributes as JSON); counts toward its size. */
  attributes?: string | null;
  /** When the message was first sent, if it was sent before (a replay from elsewhere). */
  sentAt?: number;
}

export interface SendOptions {
  /** Delay for every message that names none. */
  delaySeconds?: number;
  /** Told as the call's group is written (a bench's split of a call's time); changes nothing. */
  trace?: SendTrace;
}

/**
 * The moments of a send inside the cell, for whoever splits a call's time into stages (`npm run
 * bench host`). The cell measures no time itself (its clock may be a test's): the trace does.
 * The call's promise settling is the last moment: its group is durable.
 */
export interface SendTrace {
  /** The call's group begins its transaction. */
  groupStarted(): void;
  /** The group's transaction has committed; its flush to disk follows. */
  committed(): void;
}

/** Refuses a send call that breaks any bound, before it takes a place in the cell. */
export function checkSend(messages: readonly OutgoingMessage[], options: SendOptions): void {
  if (!Array.isArray(messages) || messages.length < 1 || messages.length > limits.batchMessagesMax) {
    const count = Array.isArray(messages) ? messages.length : 0;
    throw new CellError(
      "ERR_BATCH_COUNT",
      `a send carries 1 to ${limits.batchMessagesMax} messages, got ${count}`,
      { field: "messages", value: count, bound: `1 to ${limits.batchMessagesMax} messages` },
    );
  }
  if (options.delaySeconds !== undefined) checkDelay("delaySeconds", options.delaySeconds);
  let total = 0;
  // Field names are spelled out in the errors only: built for every message of every send, they
  // would cost more than the checks.
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (!(m.body instanceof Uint8Array)) {
      throw new CellError("ERR_INVALID", `messages[${i}].body must be bytes`, { field: `messages[${i}].body` });
    }
    if (typeof m.contentType !== "string" || m.contentType.length === 0 || m.contentType.length > limits.contentTypeCharsMax) {
      throw new CellError(
        "ERR_INVALID",
        `messages[${i}].contentType must be a string of 1 to ${limits.contentTypeCharsMax} characters`,
        { field: `messages[${i}].contentType`, value: m.contentType, bound: `1 to ${limits.contentTypeCharsMax} characters` },
      );
    }
    const attributes = m.attributes ?? null;
    if (attributes !== null && typeof attributes !== "string") {
      throw new CellError("ERR_INVALID", `messages[${i}].attributes must be a string or null`, { field: `messages[${i}].attributes` });
    }
    const bytes = m.body.byteLength + (attributes === null ? 0 : Buffer.byteLength(attributes));
    if (bytes > limits.messageBytesMax) {
      throw new CellError(
        "ERR_MESSAGE_TOO_LARGE",
        `messages[${i}] is ${bytes} bytes; a message may be at most ${limits.messageBytesMax} bytes`,
        { field: `messages[${i}].body`, value: bytes, bound: `at most ${limits.messageBytesMax} bytes` },
      );
    }
    total += bytes;
    if (m.delaySeconds !== undefined) checkDelay(`messages[${i}].delaySeconds`, m.delaySeconds);
  }
  if (total > limits.batchBytesMax) {
    throw new CellError(
      "ERR_BATCH_TOO_LARGE",
      `the messages of one send are ${total} bytes together; the bound is ${limits.batchBytesMax} bytes`,
      { field: "messages", value: total, bound: `at most ${limits.batchBytesMax} bytes` },
    );
  }
}

export function checkDelay(field: string, value: unknown): number {
  return checkRange(field, value, 0, limits.delaySecondsMax, {
    integer: true,
    unit: "seconds",
    code: "ERR_DELAY_OUT_OF_RANGE",
  });
}

/** The refusal of a send past the producer calls a cell admits at once (nothing was written). */
export function overloaded(queue: string): CellError {
  return new CellError(
    "ERR_CELL_OVERLOADED",
    `queue "${queue}" is busy: ${limits.producerCallsInFlightMax} producer calls are in flight; retry shortly`,
    { field: "queue", value: queue, bound: `at most ${limits.producerCallsInFlightMax} calls in flight` },
  );
}
