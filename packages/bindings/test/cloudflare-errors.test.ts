/**
 * Golden test of what the outside sees for every refusal. A change here changes what Worker
 * authors read and search for; update the table in cloudflare-errors.ts and this file together.
 */
import { describe, expect, test } from "vitest";
import { CellError } from "@celld/queue-cell";
import { cloudflareErrors, describeCellError, errorReply } from "../src/cloudflare-errors.ts";

describe("the code table", () => {
  test("maps every code to its HTTP status, Cloudflare code and Cloudflare name", () => {
    expect(cloudflareErrors).toEqual({
      ERR_MESSAGE_TOO_LARGE: { status: 413, code: 10204, name: "MessageSizeOutOfBounds" },
      ERR_BATCH_TOO_LARGE: { status: 413, code: 10205, name: "BatchSizeOutOfBounds" },
      ERR_BATCH_COUNT: { status: 413, code: 10206, name: "BatchCountOutOfBounds" },
      ERR_DELAY_OUT_OF_RANGE: { status: 400, code: 10202, name: "BatchDelayInvalid" },
      ERR_CONTENT_TYPE: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
      ERR_BODY_NOT_JSON: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
      ERR_INVALID: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
      ERR_OUT_OF_RANGE: { status: 400, code: 10203, name: "MessageMetadataInvalid" },
      ERR_JSON_INVALID: { status: 400, code: 10207, name: "JSONRequestBodyInvalid" },
      ERR_JSON_MALFORMED: { status: 400, code: 10208, name: "JSONRequestBodyMalformed" },
      ERR_CELL_OVERLOADED: { status: 429, code: 10250, name: "QueueOverloaded" },
      ERR_CELL_CLOSED: { status: 503, code: 15000, name: "UnknownInternalError" },
      ERR_STORAGE: { status: 503, code: 15000, name: "UnknownInternalError" },
      ERR_NO_ROUTE: { status: 404, code: 15000, name: "UnknownInternalError" },
    });
  });
});

describe("the reply", () => {
  test("carries the cause and code in the status text, the error headers and a REST-shaped body", () => {
    expect(errorReply("ERR_CELL_OVERLOADED", 'queue "q" is busy')).toEqual({
      status: 429,
      statusText: 'QueueOverloaded: queue "q" is busy (10250)',
      headers: {
        "content-type": "application/json",
        "cf-queues-error-cause": 'QueueOverloaded: queue "q" is busy',
        "cf-queues-error-code": "10250",
      },
      body: '{"success":false,"errors":[{"code":10250,"message":"QueueOverloaded: queue \\"q\\" is busy"}]}',
    });
  });

  test("keeps header text to visible ASCII and a bounded length", () => {
    const reply = errorReply("ERR_INVALID", `bad\r\nvalue é ${"x".repeat(2000)}`);
    expect(reply.headers["cf-queues-error-cause"]!.startsWith("MessageMetadataInvalid: bad??value ? xxx")).toBe(true);
    expect(reply.headers["cf-queues-error-cause"]).toHaveLength(1000);
    expect(reply.headers["cf-queues-error-cause"]!.endsWith("...")).toBe(true);
    expect(reply.statusText).toMatch(/^[\x20-\x7e]+$/);
  });
});

describe("cell errors in the Worker's terms", () => {
  const tooLarge = (field: string): CellError =>
    new CellError("ERR_MESSAGE_TOO_LARGE", "cell text", { field, value: 128_001, bound: "at most 128000 bytes" });

  test("a single send's message is 'message'; a batch names its index", () => {
    expect(describeCellError(tooLarge("messages[0].body"), "send")).toBe(
      "message is 128001 bytes; a message may be at most 128000 bytes",
    );
    expect(describeCellError(tooLarge("messages[7].body"), "sendBatch")).toBe(
      "messages[7] is 128001 bytes; a message may be at most 128000 bytes",
    );
  });

  test("batch size and count", () => {
    expect(
      describeCellError(
        new CellError("ERR_BATCH_TOO_LARGE", "cell text", { field: "messages", value: 256_001, bound: "at most 256000 bytes" }),
        "sendBatch",
      ),
    ).toBe("the messages of the batch are 256001 bytes together; a batch may be at most 256000 bytes");
    expect(
      describeCellError(
        new CellError("ERR_BATCH_COUNT", "cell text", { field: "messages", value: 101, bound: "1 to 100 messages" }),
        "sendBatch",
      ),
    ).toBe("the batch has 101 messages; a batch may have 1 to 100 messages");
  });

  test("other codes, and errors without value and bound, keep the cell's own message", () => {
    expect(describeCellError(new CellError("ERR_DELAY_OUT_OF_RANGE", "delaySeconds must be from 0 to 86400 seconds, got 9e9", { value: 9e9, bound: "0 to 86400 seconds" }), "send")).toBe(
      "delaySeconds must be from 0 to 86400 seconds, got 9e9",
    );
    expect(describeCellError(new CellError("ERR_MESSAGE_TOO_LARGE", "cell text"), "send")).toBe("cell text");
    expect(describeCellError(new CellError("ERR_STORAGE", "the queue cell could not commit: disk full"), "send")).toBe(
      "the queue cell could not commit: disk full",
    );
    // A closed queue ran nothing of the call; a storage failure's own words say what it left.
    expect(describeCellError(new CellError("ERR_CELL_CLOSED", 'queue "q" is closed'), "send")).toBe(
      'queue "q" is closed; nothing of this call was written',
    );
  });
});
