import { describe, expect, test } from "vitest";
import { isCellError, limits, resolveQueueConfig, type CellErrorCode, type QueueCell } from "../src/index.ts";
import { cellHarness, text } from "./cell-harness.ts";

const bytes = (n: number): Uint8Array => new Uint8Array(n);
const message = (n: number) => ({ body: bytes(n), contentType: "bytes" });

interface Bound {
  what: string;
  field: string;
  code: CellErrorCode;
  /** Calls the cell with the value at `max` (accepted) and `max + 1` (refused). */
  call: (cell: QueueCell, value: number) => Promise<unknown>;
  max: number;
  min?: number;
}

const bounds: Bound[] = [
  {
    what: "message body bytes",
    field: "messages[0].body",
    code: "ERR_MESSAGE_TOO_LARGE",
    max: limits.messageBytesMax,
    call: (cell, n) => cell.send([message(n)]),
  },
  {
    what: "messages per send",
    field: "messages",
    code: "ERR_BATCH_COUNT",
    max: limits.batchMessagesMax,
    min: 1,
    call: (cell, n) => cell.send(Array.from({ length: n }, () => message(1))),
  },
  {
    what: "bytes per send",
    field: "messages",
    code: "ERR_BATCH_TOO_LARGE",
    max: limits.batchBytesMax,
    // Two bodies at the message bound, a third makes up the rest.
    call: (cell, n) =>
      cell.send([
        message(limits.messageBytesMax),
        message(limits.messageBytesMax),
        message(n - 2 * limits.messageBytesMax),
      ]),
  },
  {
    what: "delaySeconds of a send",
    field: "delaySeconds",
    code: "ERR_DELAY_OUT_OF_RANGE",
    max: limits.delaySecondsMax,
    min: 0,
    call: (cell, n) => cell.send([message(1)], { delaySeconds: n }),
  },
  {
    what: "delaySeconds of a message",
    field: "messages[0].delaySeconds",
    code: "ERR_DELAY_OUT_OF_RANGE",
    max: limits.delaySecondsMax,
    min: 0,
    call: (cell, n) => cell.send([{ ...message(1), delaySeconds: n }]),
  },
  {
    what: "messages per lease",
    field: "max",
    code: "ERR_OUT_OF_RANGE",
    max: limits.leaseMessagesMax,
    min: 1,
    call: (cell, n) => cell.lease({ max: n }),
  },
  {
    what: "lease visibility timeout",
    field: "visibilityTimeoutSeconds",
    code: "ERR_OUT_OF_RANGE",
    max: limits.visibilityTimeoutSecondsMax,
    min: limits.visibilityTimeoutSecondsMin,
    call: (cell, n) => cell.lease({ max: 1, visibilityTimeoutSeconds: n }),
  },
  {
    what: "lease wait",
    field: "waitSeconds",
    code: "ERR_OUT_OF_RANGE",
    max: limits.leaseWaitSecondsMax,
    min: 0,
    // At the bound a wait would block; an abort ends it at once, after validation.
    call: (cell, n) => cell.lease({ max: 1, waitSeconds: n, signal: AbortSignal.abort() }),
  },
  {
    what: "nack delay",
    field: "nacks[0].delaySeconds",
    code: "ERR_DELAY_OUT_OF_RANGE",
    max: limits.delaySecondsMax,
    min: 0,
    call: (cell, n) => cell.nack([{ id: "x", leaseGeneration: 1, delaySeconds: n }]),
  },
];

describe.each(bounds)("$what", (bound) => {
  test(`accepted at ${bound.max}, refused at ${bound.max + 1}`, async () => {
    const h = cellHarness();
    await expect(bound.call(h.cell, bound.max)).resolves.toBeDefined();
    const refused = await bound.call(h.cell, bound.max + 1).catch((e: unknown) => e);
    expect(isCellError(refused, bound.code)).toBe(true);
    expect(refused).toMatchObject({ field: bound.field, value: expect.anything() });
    expect(String((refused as Error).message)).toContain(String(bound.max));
    await h.cell.close();
  });

  if (bound.min !== undefined) {
    test(`accepted at ${bound.min}, refused at ${bound.min - 1}`, async () => {
      const h = cellHarness();
      await expect(bound.call(h.cell, bound.min!)).resolves.toBeDefined();
      const refused = await bound.call(h.cell, bound.min! - 1).catch((e: unknown) => e);
      expect(isCellError(refused, bound.code)).toBe(true);
      expect(refused).toMatchObject({ field: bound.field });
      await h.cell.close();
    });
  }
});

test("a refused send writes nothing", async () => {
  const h = cellHarness();
  await h.cell.send([text("kept")]);
  await expect(h.cell.send([text("ok"), message(limits.messageBytesMax + 1)])).rejects.toThrow();
  expect((await h.cell.counts()).ready).toBe(1);
  await h.cell.close();
});

test.each([
  ["an ack", "acks[1].leaseGeneration", "ERR_OUT_OF_RANGE", (cell: QueueCell) => cell.ack([{ id: "a", leaseGeneration: 1 }, { id: "b", leaseGeneration: 0 }])],
  ["an ack", "acks[0].leaseGeneration", "ERR_OUT_OF_RANGE", (cell: QueueCell) => cell.ack([{ id: "a", leaseGeneration: 1.5 }])],
  ["a nack", "nacks[1].id", "ERR_INVALID", (cell: QueueCell) => cell.nack([{ id: "a", leaseGeneration: 1 }, { id: "", leaseGeneration: 1 }])],
  ["a release", "refs[0].leaseGeneration", "ERR_OUT_OF_RANGE", (cell: QueueCell) => cell.release([{ id: "a", leaseGeneration: "2" as unknown as number }])],
] as const)("%s with a bad lease ref is refused, naming %s", async (_, field, code, call) => {
  const h = cellHarness();
  await h.cell.send([text("kept")]);
  const [leased] = await h.cell.lease({ max: 1 });
  const refused = await call(h.cell).catch((e: unknown) => e);
  expect(refused).toMatchObject({ code, field });
  expect(String((refused as Error).message)).toContain(field);
  // Nothing of the call was applied: the message is still leased.
  expect(await h.cell.counts()).toMatchObject({ leased: 1 });
  expect(leased!.leaseGeneration).toBe(1);
  await h.cell.close();
});

test("delays must be whole seconds", async () => {
  const h = cellHarness();
  await expect(h.cell.send([message(1)], { delaySeconds: 1.5 })).rejects.toMatchObject({
    code: "ERR_DELAY_OUT_OF_RANGE",
    message: "delaySeconds must be a whole number from 0 to 86400 seconds, got 1.5",
  });
  await h.cell.close();
});

describe("queue config bounds", () => {
  const cases: Array<[keyof Parameters<typeof resolveQueueConfig>[0], number, number]> = [
    ["maxDeliveries", limits.maxDeliveriesMin, limits.cellDeliveriesMax],
    ["visibilityTimeoutSeconds", limits.visibilityTimeoutSecondsMin, limits.visibilityTimeoutSecondsMax],
    ["deliveryDelaySeconds", 0, limits.delaySecondsMax],
    ["retentionSeconds", limits.retentionSecondsMin, limits.retentionSecondsMax],
  ];
  test.each(cases)("%s from %i to %i", (field, min, max) => {
    expect(resolveQueueConfig({ [field]: min })[field]).toBe(min);
    expect(resolveQueueConfig({ [field]: max })[field]).toBe(max);
    expect(() => resolveQueueConfig({ [field]: max + 1 })).toThrow(`${field} must be from ${min} to ${max}`);
    expect(() => resolveQueueConfig({ [field]: min - 1 })).toThrow(`${field} must be from ${min} to ${max}`);
  });

  test("defaults", () => {
    expect(resolveQueueConfig({})).toEqual({
      maxDeliveries: limits.maxDeliveriesDefault,
      visibilityTimeoutSeconds: limits.visibilityTimeoutSecondsDefault,
      deliveryDelaySeconds: 0,
      deadLetter: { kind: "set" },
      retentionSeconds: limits.retentionSeconds,
      deliveryPaused: false,
    });
  });
});

test("golden: the words a caller sees", async () => {
  const h = cellHarness();
  const messages = async (call: () => Promise<unknown>): Promise<string> =>
    call().then(
      () => "accepted",
      (e: Error) => `${e.name}: ${e.message}`,
    );
  expect(await messages(() => h.cell.send([message(limits.messageBytesMax + 1)]))).toBe(
    "CellError [ERR_MESSAGE_TOO_LARGE]: messages[0] is 128001 bytes; a message may be at most 128000 bytes",
  );
  expect(await messages(() => h.cell.send([]))).toBe(
    "CellError [ERR_BATCH_COUNT]: a send carries 1 to 100 messages, got 0",
  );
  expect(await messages(() => h.cell.send([message(128_000), message(128_000), message(1)]))).toBe(
    "CellError [ERR_BATCH_TOO_LARGE]: the messages of one send are 256001 bytes together; the bound is 256000 bytes",
  );
  expect(await messages(() => h.cell.send([message(1)], { delaySeconds: 86_401 }))).toBe(
    "CellError [ERR_DELAY_OUT_OF_RANGE]: delaySeconds must be from 0 to 86400 seconds, got 86401",
  );
  expect(await messages(() => h.cell.lease({ max: 101 }))).toBe(
    "CellError [ERR_OUT_OF_RANGE]: max must be from 1 to 100 messages, got 101",
  );
  await h.cell.close();
  expect(await messages(() => h.cell.send([message(1)]))).toBe('CellError [ERR_CELL_CLOSED]: queue "q" is closed');
});
