import { limits } from "@celld/queue-cell";
import { describe, expect, test } from "vitest";
import { BatchFrameError, decodeBatch, encodeBatch, type BatchFrame } from "../src/batch-wire.ts";
import { toConsumerMessage, type BatchMessage } from "../src/consumer-message.ts";

const utf8 = new TextEncoder();

function message(overrides: Partial<BatchMessage> = {}): BatchMessage {
  return {
    id: "01JAAAAAAAAAAAAAAAAAAAAAAA",
    sentAt: 1_767_225_600_123,
    deliveries: 1,
    contentType: "bytes",
    body: new Uint8Array([1, 2, 3]),
    ...overrides,
  };
}

function frame(overrides: Partial<BatchFrame> = {}): BatchFrame {
  return {
    binding: "CONSUMER_0",
    queue: "jobs",
    metadata: { metrics: { backlogCount: 7, backlogBytes: 700, oldestMessageTimestamp: new Date(1_767_225_600_000) } },
    messages: [message()],
    ...overrides,
  };
}

/** The frame's parts, read by hand rather than by decodeBatch. */
function split(bytes: Uint8Array): { header: unknown; headerBytes: number; bodies: Uint8Array } {
  const headerBytes = new DataView(bytes.buffer, bytes.byteOffset).getUint32(0);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + headerBytes))) as unknown;
  return { header, headerBytes, bodies: bytes.subarray(4 + headerBytes) };
}

/** A frame put together by hand: [u32 header length][header][bodies]. */
function handMade(header: string | Uint8Array, bodies: number[] = []): Uint8Array {
  const h = typeof header === "string" ? utf8.encode(header) : header;
  const out = new Uint8Array(4 + h.byteLength + bodies.length);
  new DataView(out.buffer).setUint32(0, h.byteLength);
  out.set(h, 4);
  out.set(bodies, 4 + h.byteLength);
  return out;
}

const goodHeader = {
  binding: "CONSUMER_0",
  queue: "jobs",
  metrics: { backlogCount: 0, backlogBytes: 0 },
  messages: [{ id: "a", timestamp: 1, attempts: 1, contentType: "bytes", length: 2 }],
};

describe("the frame layout", () => {
  test("a u32 header length, the JSON header, then the bodies end to end in message order", () => {
    const bytes = encodeBatch(
      frame({
        messages: [
          message({ id: "m1", body: new Uint8Array([10, 11]), contentType: "bytes" }),
          message({ id: "m2", body: utf8.encode("hi"), contentType: "text", deliveries: 3, sentAt: 5 }),
        ],
      }),
    );
    const { header, headerBytes, bodies } = split(bytes);
    expect(header).toEqual({
      binding: "CONSUMER_0",
      queue: "jobs",
      metrics: { backlogCount: 7, backlogBytes: 700, oldestMessageTimestamp: 1_767_225_600_000 },
      messages: [
        { id: "m1", timestamp: 1_767_225_600_123, attempts: 1, contentType: "bytes", length: 2 },
        { id: "m2", timestamp: 5, attempts: 3, contentType: "text", length: 2 },
      ],
    });
    expect([...bodies]).toEqual([10, 11, 104, 105]);
    expect(bytes.byteLength).toBe(4 + headerBytes + 4);
  });

  test("no oldest message: the field is left out, and the decoded metrics have none", () => {
    const bytes = encodeBatch(frame({ metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } }));
    expect((split(bytes).header as { metrics: object }).metrics).toEqual({ backlogCount: 0, backlogBytes: 0 });
    expect(decodeBatch(bytes).metadata).toEqual({ metrics: { backlogCount: 0, backlogBytes: 0 } });
  });
});

describe("a run: a send's messages leased together", () => {
  // Ids as a cell gives them within one millisecond: each the one after the last.
  const ids = ["01ARYZ6S41000000000000000Y", "01ARYZ6S41000000000000000Z", "01ARYZ6S410000000000000010"];
  const run = ids.map((id, i) => message({ id, contentType: "json", body: utf8.encode(`{"n":${i}}`) }));

  test("travel as the first id, what they share and each length, and come back whole", () => {
    const bytes = encodeBatch(frame({ messages: run }));
    expect(split(bytes).header).toEqual({
      binding: "CONSUMER_0",
      queue: "jobs",
      metrics: { backlogCount: 7, backlogBytes: 700, oldestMessageTimestamp: 1_767_225_600_000 },
      run: { first: ids[0], timestamp: 1_767_225_600_123, attempts: 1, contentType: "json", lengths: [7, 7, 7] },
    });
    expect(decodeBatch(bytes).messages.map((m) => ({ ...m, body: new TextDecoder().decode(m.body) }))).toEqual(
      run.map((m) => ({ ...m, body: new TextDecoder().decode(m.body) })),
    );
  });

  test.each([
    ["one id out of step", [run[0]!, run[2]!]],
    ["another timestamp", [run[0]!, { ...run[1]!, sentAt: 5 }]],
    ["another attempt count", [run[0]!, { ...run[1]!, deliveries: 2 }]],
    ["another content type", [run[0]!, { ...run[1]!, contentType: "text" }]],
    ["ids that are not ULIDs", [message({ id: "a" }), message({ id: "b" })]],
    ["one message", [run[0]!]],
  ])("messages with %s travel one by one, and come back whole", (_, messages) => {
    const bytes = encodeBatch(frame({ messages }));
    expect(split(bytes).header).toHaveProperty("messages");
    expect(decodeBatch(bytes).messages.map((m) => m.id)).toEqual(messages.map((m) => m.id));
  });

  const runHeader = { ...goodHeader, messages: undefined, run: { first: ids[0], timestamp: 1, attempts: 1, contentType: "json", lengths: [1, 1] } };
  test.each([
    ["both messages and a run", { ...runHeader, messages: goodHeader.messages }, /messages or a run, not both/],
    ["a run of none", { ...runHeader, run: { ...runHeader.run, lengths: [] } }, /run\.lengths must be a non-empty array/],
    ["a negative length", { ...runHeader, run: { ...runHeader.run, lengths: [1, -1] } }, /run\.lengths\[1\] must be a whole number from 0, got -1/],
    ["no first id", { ...runHeader, run: { ...runHeader.run, first: "" } }, /run\.first must be a non-empty string/],
    ["attempts of 0", { ...runHeader, run: { ...runHeader.run, attempts: 0 } }, /run\.attempts must be a whole number from 1/],
    ["ids past the top", { ...runHeader, run: { ...runHeader.run, first: "01ARYZ6S41ZZZZZZZZZZZZZZZZ" } }, /has no id after it for message 1/],
  ])("the decoder refuses %s", (_, header, problem) => {
    const attempt = () => decodeBatch(handMade(JSON.stringify(header), [1, 2]));
    expect(attempt).toThrow(BatchFrameError);
    expect(attempt).toThrow(problem);
  });

  test("the good run header itself decodes (so each case above fails for its own reason)", () => {
    expect(decodeBatch(handMade(JSON.stringify(runHeader), [1, 2])).messages.map((m) => m.id)).toEqual(ids.slice(0, 2));
  });
});

describe("round trip", () => {
  test("binding, queue, metadata (a Date again) and every message come back as they went", () => {
    const sent = frame({
      messages: [
        message({ id: "x", contentType: "v8", body: new Uint8Array([0xff, 0x0f, 0x22, 0x01, 0x61]) }),
        message({ id: "y", contentType: "json", deliveries: 4, body: utf8.encode('{"a":1}') }),
      ],
    });
    const got = decodeBatch(encodeBatch(sent));
    expect(got.binding).toBe("CONSUMER_0");
    expect(got.queue).toBe("jobs");
    expect(got.metadata.metrics.oldestMessageTimestamp).toBeInstanceOf(Date);
    expect(got.metadata).toEqual(sent.metadata);
    expect(got.messages.map((m) => ({ ...m, body: [...m.body] }))).toEqual(
      sent.messages.map((m) => ({ ...m, body: [...m.body] })),
    );
  });

  test("an empty body between two others keeps every offset right", () => {
    const bodies = [new Uint8Array([1]), new Uint8Array(0), new Uint8Array([2, 3])];
    const got = decodeBatch(encodeBatch(frame({ messages: bodies.map((body, i) => message({ id: `m${i}`, body })) })));
    expect(got.messages.map((m) => [...m.body])).toEqual([[1], [], [2, 3]]);
  });

  test("bodies that are views of one blob, end to end or not, arrive in message order", () => {
    // As a lease of one send gives them: views of one blob, end to end (copied as one run);
    // here mixed with a separate body, a view out of order and an empty one.
    const blob = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]);
    const view = (from: number, to: number) => blob.subarray(from, to);
    const bodies = [view(0, 2), view(2, 3), view(3, 3), view(3, 5), new Uint8Array([9]), view(5, 8), view(0, 1)];
    const got = decodeBatch(encodeBatch(frame({ messages: bodies.map((body, i) => message({ id: `m${i}`, body })) })));
    expect(got.messages.map((m) => [...m.body])).toEqual([[1, 2], [3], [], [4, 5], [9], [6, 7, 8], [1]]);
  });

  test(`a body of ${limits.messageBytesMax} bytes, every byte value, arrives exactly`, () => {
    const big = Uint8Array.from({ length: limits.messageBytesMax }, (_, i) => (i * 31 + 7) & 0xff);
    const bytes = encodeBatch(frame({ messages: [message({ body: big }), message({ id: "after", body: new Uint8Array([9]) })] }));
    const [first, second] = decodeBatch(bytes).messages;
    expect(first!.body.byteLength).toBe(limits.messageBytesMax);
    expect(Buffer.compare(first!.body, big)).toBe(0);
    expect([...second!.body]).toEqual([9]);
  });

  test("non-ASCII ids, queue and text: the header length counts bytes, not characters", () => {
    const id = "ü-日本-𝄞";
    const text = "héllo, 世界 𝄞";
    const bytes = encodeBatch(frame({ queue: "jobs-ü", messages: [message({ id, contentType: "text", body: utf8.encode(text) })] }));
    const { header, headerBytes } = split(bytes);
    expect(headerBytes).toBeGreaterThan(JSON.stringify(header).length);
    const got = decodeBatch(bytes);
    expect(got.queue).toBe("jobs-ü");
    expect(got.messages[0]!.id).toBe(id);
    expect(toConsumerMessage(got.messages[0]!)).toMatchObject({ id, body: text });
  });

  test("a frame read from a view with an offset (a pooled Buffer) decodes the same", () => {
    const bytes = encodeBatch(frame());
    const padded = Buffer.concat([Buffer.from([0xaa, 0xbb, 0xcc]), bytes]).subarray(3);
    expect([...decodeBatch(padded).messages[0]!.body]).toEqual([1, 2, 3]);
  });
});

describe("decoded messages, as the dispatch Worker hands them to Fetcher.queue", () => {
  const v8 = new Uint8Array([0xff, 0x0f, 0x49, 0x54]);
  const originals = [
    message({ id: "v8", contentType: "v8", body: v8 }),
    message({ id: "json", contentType: "json", body: utf8.encode('{"n":[1,2]}') }),
    message({ id: "not-json", contentType: "json", body: utf8.encode("not { json") }),
    message({ id: "text", contentType: "text", body: utf8.encode("plain ✓") }),
    message({ id: "bytes", contentType: "bytes", body: new Uint8Array([0, 255, 128]) }),
    message({ id: "other", contentType: "application/octet-stream", body: new Uint8Array([42]) }),
  ];
  const decoded = decodeBatch(encodeBatch(frame({ messages: originals }))).messages.map(toConsumerMessage);

  test("are what toConsumerMessage makes of the originals", () => {
    expect(decoded).toEqual(originals.map(toConsumerMessage));
    expect(decoded.map((m) => ("body" in m ? m.body : "serialized"))).toEqual([
      "serialized",
      { n: [1, 2] },
      "not { json",
      "plain ✓",
      new Uint8Array([0, 255, 128]).buffer,
      new Uint8Array([42]).buffer,
    ]);
  });

  test("own exactly their bytes, not the whole frame behind the view", () => {
    const bytes = decoded[4] as { body: ArrayBuffer };
    expect(bytes.body.byteLength).toBe(3);
    const serialized = decoded[0] as { serializedBody: Uint8Array };
    expect(serialized.serializedBody.byteOffset).toBe(0);
    expect(serialized.serializedBody.buffer.byteLength).toBe(v8.byteLength);
  });
});

describe("the encoder refuses a batch the decoder would refuse, naming the field", () => {
  const cases: Array<[string, Partial<BatchFrame>, RegExp]> = [
    ["no messages", { messages: [] }, /messages must be a non-empty array/],
    ["an empty binding", { binding: "" }, /binding must be a non-empty string, got ""/],
    ["an empty queue name", { queue: "" }, /queue must be a non-empty string/],
    ["an empty id", { messages: [message({ id: "" })] }, /messages\[0\]\.id must be a non-empty string/],
    ["an empty content type", { messages: [message(), message({ contentType: "" })] }, /messages\[1\]\.contentType/],
    ["a timestamp that is not a number", { messages: [message({ sentAt: Number.NaN })] }, /messages\[0\]\.timestamp must be a whole number from 0, got NaN/],
    ["attempts of 0", { messages: [message({ deliveries: 0 })] }, /messages\[0\]\.attempts must be a whole number from 1, got 0/],
    ["a fractional backlog", { metadata: { metrics: { backlogCount: 1.5, backlogBytes: 0 } } }, /metrics\.backlogCount/],
    ["a negative backlog size", { metadata: { metrics: { backlogCount: 0, backlogBytes: -1 } } }, /metrics\.backlogBytes .* got -1/],
    [
      "an invalid Date",
      { metadata: { metrics: { backlogCount: 0, backlogBytes: 0, oldestMessageTimestamp: new Date(Number.NaN) } } },
      /metrics\.oldestMessageTimestamp must be a whole number from 0, got NaN/,
    ],
  ];
  test.each(cases)("%s", (_, overrides, message) => {
    const attempt = () => encodeBatch(frame(overrides));
    expect(attempt).toThrow(BatchFrameError);
    expect(attempt).toThrow(message);
  });
});

describe("the decoder refuses a broken frame", () => {
  const cases: Array<[string, Uint8Array, RegExp]> = [
    ["shorter than the header length", new Uint8Array([0, 0, 1]), /3 bytes, too short for the 4-byte header length/],
    ["a header length past the end", handMade("{}").subarray(0, 5), /the header length says 2 bytes but 1 follow/],
    ["a header that is not JSON", handMade("{nope"), /the header is not UTF-8 JSON/],
    ["a header that is not UTF-8", handMade(new Uint8Array([0x7b, 0xff, 0x7d])), /the header is not UTF-8 JSON/],
    ["a header that is an array", handMade("[]"), /header must be an object/],
    ["a missing metrics object", handMade(JSON.stringify({ ...goodHeader, metrics: undefined }), [1, 2]), /metrics must be an object/],
    ["bodies shorter than announced", handMade(JSON.stringify(goodHeader), [1]), /the bodies are 1 bytes; the header accounts for 2/],
    ["bodies longer than announced", handMade(JSON.stringify(goodHeader), [1, 2, 3]), /the bodies are 3 bytes; the header accounts for 2/],
    [
      "a negative length",
      handMade(JSON.stringify({ ...goodHeader, messages: [{ ...goodHeader.messages[0], length: -1 }] })),
      /messages\[0\]\.length must be a whole number from 0, got -1/,
    ],
    [
      "attempts as a string",
      handMade(JSON.stringify({ ...goodHeader, messages: [{ ...goodHeader.messages[0], attempts: "1" }] }), [1, 2]),
      /messages\[0\]\.attempts must be a whole number from 1, got "1"/,
    ],
  ];
  test.each(cases)("%s", (_, bytes, message) => {
    const attempt = () => decodeBatch(bytes);
    expect(attempt).toThrow(BatchFrameError);
    expect(attempt).toThrow(message);
  });

  test("the good header itself decodes (so each case above fails for its own reason)", () => {
    expect(decodeBatch(handMade(JSON.stringify(goodHeader), [1, 2])).messages[0]!.body).toEqual(new Uint8Array([1, 2]));
  });
});
