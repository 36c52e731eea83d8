import { limits } from "@celld/queue-cell";
import { expect, test } from "vitest";
import { resolveBatchOutcome, type QueueHandlerResult } from "../src/batch-outcome.ts";

const ok: QueueHandlerResult = { outcome: "ok", ackAll: false, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] };
const threw: QueueHandlerResult = { ...ok, outcome: "exception" };
const retryDelay = 7;

// Each row: what the handler did, and each message's fate ("ack" or the retry delay).
const cases: Array<[string, QueueHandlerResult, Record<string, "ack" | number>]> = [
  ["returned: everything acked", ok, { a: "ack", b: "ack" }],
  ["threw: everything retried with retry_delay", threw, { a: retryDelay, b: retryDelay }],
  ["explicit ack survives a throw", { ...threw, explicitAcks: ["a"] }, { a: "ack", b: retryDelay }],
  ["explicit ack beats the message's own retry", { ...ok, explicitAcks: ["a"], retryMessages: [{ msgId: "a", delaySeconds: 9 }] }, { a: "ack", b: "ack" }],
  ["a message's retry beats ackAll", { ...ok, ackAll: true, retryMessages: [{ msgId: "a", delaySeconds: 9 }] }, { a: 9, b: "ack" }],
  ["ackAll then throw acks everything", { ...threw, ackAll: true }, { a: "ack", b: "ack" }],
  ["ackAll beats retryAll", { ...ok, ackAll: true, retryBatch: { retry: true, delaySeconds: 30 } }, { a: "ack", b: "ack" }],
  ["retryAll with a delay", { ...ok, retryBatch: { retry: true, delaySeconds: 30 } }, { a: 30, b: 30 }],
  ["retryAll without a delay uses retry_delay", { ...ok, retryBatch: { retry: true } }, { a: retryDelay, b: retryDelay }],
  ["a message retry without a delay takes the batch's", { ...ok, retryBatch: { retry: true, delaySeconds: 30 }, retryMessages: [{ msgId: "a" }] }, { a: 30, b: 30 }],
  ["a message retry without any delay takes retry_delay", { ...ok, retryMessages: [{ msgId: "a" }] }, { a: retryDelay, b: "ack" }],
  ["exceeded CPU: retried", { ...ok, outcome: "exceededCpu" }, { a: retryDelay, b: retryDelay }],
  ["a delay beyond the bound is brought into range", { ...ok, retryMessages: [{ msgId: "a", delaySeconds: 1e9 }, { msgId: "b", delaySeconds: -5 }] }, { a: limits.delaySecondsMax, b: 0 }],
  ["a fractional delay is truncated, as Cloudflare does", { ...ok, retryMessages: [{ msgId: "a", delaySeconds: 2.9 }] }, { a: 2, b: "ack" }],
];

test.each(cases)("%s", (_, result, expected) => {
  const messages = [{ id: "a" }, { id: "b" }];
  const settlement = resolveBatchOutcome(messages, result, retryDelay);
  const fate: Record<string, "ack" | number> = {};
  for (const m of settlement.acks) fate[m.id] = "ack";
  for (const r of settlement.retries) fate[r.message.id] = r.delaySeconds;
  // The messages themselves come back, not copies: a leased message is its own lease ref.
  for (const m of [...settlement.acks, ...settlement.retries.map((r) => r.message)]) expect(messages).toContain(m);
  expect(fate).toEqual(expected);
});
