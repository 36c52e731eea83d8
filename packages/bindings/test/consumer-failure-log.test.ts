import { ManualClock } from "@celld/queue-cell";
import { expect, test } from "vitest";
import {
  ConsumerFailureLog,
  distinctErrorsPrintedMax,
  failedFate,
  fateWaitForErrorMs,
  retriedPastLastFate,
  repeatedFailureWindowMs,
  waitingFatesMax,
  type BatchFate,
} from "../src/consumer-failure-log.ts";

// What a consumer failing again and again writes, on the fake clock; the end-to-end test
// (test/consumer-failure-log.test.ts) has workerd's own reports. A report is printed as given; a
// fate's line goes through warn().

function logged() {
  const clock = new ManualClock(1_000_000);
  const lines: string[] = [];
  const log = new ConsumerFailureLog(clock, { report: (text) => lines.push(`report: ${text}`), warn: (message) => lines.push(`warn: ${message}`) });
  return { clock, lines, log };
}

const report = (message: string) => `[celld] queue() handler for "jobs" threw: Error: ${message}\n    at queue (worker.js:3:11)`;
const fate = (tag: string): BatchFate => ({
  queue: "jobs",
  tag,
  kind: "exception",
  line: `queue "jobs": batch ${tag} failed; 1 of 1 message(s) will be retried`,
  size: 1,
  acked: 0,
  retried: 1,
  deadLettered: 0,
  deadLetter: { kind: "delete" },
});

test("an error that names its job is a new error every time: past the first few, the rest are counted in one line", () => {
  const { clock, lines, log } = logged();
  const failures = distinctErrorsPrintedMax + 4;
  for (let i = 0; i < failures; i++) {
    log.handlerThrew("jobs", `m${i}`, report(`job ${i} failed`));
    log.batchFailed(fate(`m${i}`));
  }
  const printed = lines.filter((l) => l.startsWith("report: "));
  expect(printed).toHaveLength(distinctErrorsPrintedMax);
  expect(lines.filter((l) => l.startsWith("warn: ") && !l.includes("threw"))).toHaveLength(distinctErrorsPrintedMax);
  expect(lines.at(-1)).toBe(
    `warn: queue "jobs": the queue() handler threw ${distinctErrorsPrintedMax} different errors within 60 s; ` +
      "the errors it throws next are counted, not printed, until that time has passed",
  );
  const before = lines.length;
  clock.advance(repeatedFailureWindowMs);
  expect(lines.slice(before)).toEqual([
    `warn: queue "jobs": the queue() handler threw 4 other error(s) within 60 s of the notice above, not printed; ` +
      "of their batches' messages, 4 of 4 message(s) will be retried",
  ]);
  // A new window: the next error is printed in full again.
  log.handlerThrew("jobs", "n1", report("job 100 failed"));
  expect(lines.at(-1)).toBe(`report: ${report("job 100 failed")}`);
});

test("an error already printed is still counted in its own window once the others overflow", () => {
  const { clock, lines, log } = logged();
  for (let i = 0; i < distinctErrorsPrintedMax; i++) log.handlerThrew("jobs", `m${i}`, report(`e${i}`));
  log.handlerThrew("jobs", "again", report("e0"));
  log.handlerThrew("jobs", "other", report("e-new"));
  // Another queue has its own allowance.
  log.handlerThrew("mail", "x", report("e-mail").replace('"jobs"', '"mail"'));
  expect(lines.filter((l) => l.startsWith("report: "))).toHaveLength(distinctErrorsPrintedMax + 1);
  clock.advance(repeatedFailureWindowMs);
  expect(lines.filter((l) => l.includes("threw Error: e0 1 more time(s)"))).toHaveLength(1);
  expect(lines.filter((l) => l.includes("threw 1 other error(s)"))).toHaveLength(1);
});

test("a fate that comes after its error's window has closed does not keep the next window's error from being printed", () => {
  // In a storm the handler's error reaches celld before its batch is settled; the minute can end
  // between the two.
  const { clock, lines, log } = logged();
  log.handlerThrew("jobs", "m1", report("boom"));
  log.batchFailed(fate("m1"));
  log.handlerThrew("jobs", "m2", report("boom"));
  clock.advance(repeatedFailureWindowMs);
  log.batchFailed(fate("m2"));
  // The minute after: the same error is printed in full again, as a new window's first.
  log.handlerThrew("jobs", "m3", report("boom"));
  expect(lines.filter((l) => l.startsWith("report: "))).toEqual([`report: ${report("boom")}`, `report: ${report("boom")}`]);
  log.batchFailed(fate("m3"));
  log.handlerThrew("jobs", "m4", report("boom"));
  log.batchFailed(fate("m4"));
  const before = lines.length;
  log.flush();
  // The summary speaks of that report, under the error's name, with its batch's fate.
  expect(lines.slice(before)).toEqual([
    'warn: queue "jobs": the queue() handler threw Error: boom 1 more time(s) within 60 s of the report above, not printed again; ' +
      "of their batches' messages, 1 of 1 message(s) will be retried",
  ]);
});

test("past the distinct errors' bound, a late fate does not turn the overflow into a window without its notice", () => {
  const { clock, lines, log } = logged();
  for (let i = 0; i < distinctErrorsPrintedMax; i++) log.handlerThrew("jobs", `m${i}`, report(`e${i}`));
  log.handlerThrew("jobs", "over", report("e-over"));
  clock.advance(repeatedFailureWindowMs);
  log.batchFailed(fate("over"));
  for (let i = 0; i < distinctErrorsPrintedMax; i++) log.handlerThrew("jobs", `n${i}`, report(`f${i}`));
  log.handlerThrew("jobs", "over2", report("f-over"));
  expect(lines.filter((l) => l.startsWith("report: "))).toHaveLength(2 * distinctErrorsPrintedMax);
  expect(lines.filter((l) => l.includes("different errors within"))).toHaveLength(2);
});

test("an error rethrown with a different cause is a different error: its cause is printed", () => {
  // `throw new Error("job failed", { cause })` from one line: the first line and frame are the
  // same whatever went wrong underneath, and the cause is what its author needs to read.
  const { lines, log } = logged();
  const wrapped = (cause: string) => `${report("job failed")}\nCaused by: Error: ${cause}\n    at db (worker.js:9:5)`;
  log.handlerThrew("jobs", "m1", wrapped("connection refused"));
  log.handlerThrew("jobs", "m2", wrapped("connection refused"));
  log.handlerThrew("jobs", "m3", wrapped("disk full"));
  expect(lines.filter((l) => l.startsWith("report: "))).toEqual([
    `report: ${wrapped("connection refused")}`,
    `report: ${wrapped("disk full")}`,
  ]);
});

// The error comes on workerd's stderr, the fate in the dispatch Worker's answer: either can be first.
for (const order of ["error first", "fate first"] as const) {
  test(`${order}: the error is printed with its fate, and the same failure again is counted in its window`, () => {
    const { clock, lines, log } = logged();
    const fail = (tag: string) => {
      if (order === "error first") {
        log.handlerThrew("jobs", tag, report("boom"));
        log.batchFailed(fate(tag));
      } else {
        log.batchFailed(fate(tag));
        clock.advance(fateWaitForErrorMs - 1);
        log.handlerThrew("jobs", tag, report("boom"));
      }
    };
    fail("m1");
    fail("m2");
    expect(lines).toEqual([`report: ${report("boom")}`, `warn: ${fate("m1").line}`]);
    log.flush();
    expect(lines.slice(2)).toEqual([
      'warn: queue "jobs": the queue() handler threw Error: boom 1 more time(s) within 60 s of the report above, not printed again; ' +
        "of their batches' messages, 1 of 1 message(s) will be retried",
    ]);
  });
}

test("a fate whose error never comes is printed by its outcome once it has waited, and is then forgotten", () => {
  const { clock, lines, log } = logged();
  log.batchFailed(fate("m1"));
  clock.advance(fateWaitForErrorMs - 1);
  expect(lines).toEqual([]);
  clock.advance(1);
  expect(lines).toEqual([`warn: ${fate("m1").line}`]);
  // Its error, should it come after all, is printed as its own, not paired with a fate gone by.
  log.handlerThrew("jobs", "m1", report("late"));
  expect(lines.slice(1)).toEqual([`report: ${report("late")}`]);
  // Batches that failed with no throw have no error to wait for.
  log.batchFailed({ ...fate("w1"), kind: "wall-time", line: "wall time" });
  expect(lines.at(-1)).toBe("warn: wall time");
});

test("fates waiting for their error are bounded: past the bound, the one that waited longest goes at once", () => {
  const { clock, lines, log } = logged();
  for (let i = 0; i < waitingFatesMax; i++) log.batchFailed(fate(`m${i}`));
  expect(lines).toEqual([]);
  log.batchFailed(fate("one-more"));
  expect(lines).toEqual([`warn: ${fate("m0").line}`]);
  clock.advance(fateWaitForErrorMs);
  // The rest went by their outcome together, counted in the outcome's window.
  expect(lines).toHaveLength(1);
  log.flush();
  expect(lines.at(-1)).toContain(`failed (exception) ${waitingFatesMax} more time(s)`);
});

test("a fate waiting for its error is said at stop", () => {
  const { lines, log } = logged();
  log.batchFailed(fate("m1"));
  log.flush();
  expect(lines).toEqual([`warn: ${fate("m1").line}`]);
});

test("an error is paired only with a fate of its own queue, whatever its tag", () => {
  const { clock, lines, log } = logged();
  log.handlerThrew("mail", "m1", report("boom").replace('"jobs"', '"mail"'));
  log.batchFailed(fate("m1"));
  // The fate of "jobs" waits for an error of "jobs", and goes by its outcome when none comes.
  expect(lines).toEqual([`report: ${report("boom").replace('"jobs"', '"mail"')}`]);
  clock.advance(fateWaitForErrorMs);
  expect(lines.slice(1)).toEqual([`warn: ${fate("m1").line}`]);
});

test("a fate says how many of the batch's messages were acked, when some were: the rest of a batch whose handler retried one on its last delivery", () => {
  const deleted = { kind: "delete" } as const;
  expect(failedFate(2, { acked: 1, retried: 0, deadLettered: 1 }, deleted)).toBe(
    "0 of 2 message(s) will be retried; 1 was acked; 1 had no retries left and was deleted (the consumer names no dead_letter_queue)",
  );
  expect(failedFate(5, { acked: 3, retried: 2, deadLettered: 0 }, deleted)).toBe("2 of 5 message(s) will be retried; 3 were acked");
  // A batch that failed whole: nothing about acks.
  expect(failedFate(1, { acked: 0, retried: 1, deadLettered: 0 }, deleted)).toBe("1 of 1 message(s) will be retried");
});

test("messages a returning handler retried on their last delivery are said as dead-lettered by its retry(), not as a failure to retry", () => {
  const queue = { kind: "queue", queue: "jobs-dlq" } as const;
  expect(retriedPastLastFate({ acked: 0, retried: 0, deadLettered: 1 }, queue, 2)).toBe(
    'retried 1 message on its last delivery (max_retries = 2), so it went to the dead-letter queue "jobs-dlq"',
  );
  expect(retriedPastLastFate({ acked: 4, retried: 1, deadLettered: 3 }, { kind: "delete" }, 0)).toBe(
    "retried 3 messages on their last delivery (max_retries = 0), so they were deleted (the consumer names no dead_letter_queue); " +
      "1 other message(s) will be retried; 4 were acked",
  );
  expect(retriedPastLastFate({ acked: 0, retried: 0, deadLettered: 2 }, { kind: "set" }, 5)).toBe(
    "retried 2 messages on their last delivery (max_retries = 5), so they went to the queue's dead-letter set",
  );
});

test("the summary of returning batches that retried messages on their last delivery says them as the first line did, acked messages too", () => {
  const { clock, lines, log } = logged();
  const acking = (tag: string): BatchFate => ({ ...fate(tag), kind: "retried", about: "retried messages past their last delivery", size: 2, acked: 1, retried: 0, deadLettered: 1 });
  for (const tag of ["a", "b", "c"]) log.batchFailed(acking(tag));
  clock.advance(repeatedFailureWindowMs);
  // Not "0 of 4 message(s) will be retried; ... had no retries left": the handler asked for each retry.
  expect(lines.at(-1)).toBe(
    'warn: queue "jobs": the queue() handler retried messages past their last delivery 2 more time(s) within 60 s of the report above, not printed again; ' +
      "in all, it retried 2 messages on their last delivery, so they were deleted (the consumer names no dead_letter_queue); 2 were acked",
  );
});

test("a service-worker shim's report of a rejected event.waitUntil() promise is summed up by its error alone, as a throw is", () => {
  const { clock, lines, log } = logged();
  const rejected = `[celld] an event.waitUntil() promise of the "queue" listener for "jobs" rejected: Error: mail server said 503\n    at send (worker.js:3:11)`;
  for (const tag of ["m1", "m2"]) {
    log.handlerThrew("jobs", tag, rejected);
    log.batchFailed(fate(tag));
  }
  clock.advance(repeatedFailureWindowMs);
  expect(lines.at(-1)).toBe(
    'warn: queue "jobs": the queue() handler threw Error: mail server said 503 1 more time(s) within 60 s of the report above, not printed again; ' +
      "of their batches' messages, 1 of 1 message(s) will be retried",
  );
});

test("a queue whose consumer is a service-worker script is said with its listener: the overflow's notice and the summaries name it", () => {
  const { clock, lines, log } = logged();
  log.consumedBy("jobs", "service-worker");
  const listenerReport = (message: string) => `[celld] "queue" listener for "jobs" threw: Error: ${message}\n    at worker.js:3:11`;
  for (let i = 0; i < distinctErrorsPrintedMax + 1; i++) {
    log.handlerThrew("jobs", `m${i}`, listenerReport(`job ${i} failed`));
    log.batchFailed(fate(`m${i}`));
  }
  log.handlerThrew("jobs", "m0-again", listenerReport("job 0 failed"));
  log.batchFailed(fate("m0-again"));
  expect(lines.filter((l) => l.includes("different errors within"))).toEqual([
    `warn: queue "jobs": the "queue" event listener threw ${distinctErrorsPrintedMax} different errors within 60 s; ` +
      "the errors it throws next are counted, not printed, until that time has passed",
  ]);
  const before = lines.length;
  clock.advance(repeatedFailureWindowMs);
  expect(lines.slice(before).sort()).toEqual([
    'warn: queue "jobs": the "queue" event listener threw 1 other error(s) within 60 s of the notice above, not printed; ' +
      "of their batches' messages, 1 of 1 message(s) will be retried",
    'warn: queue "jobs": the "queue" event listener threw Error: job 0 failed 1 more time(s) within 60 s of the report above, not printed again; ' +
      "of their batches' messages, 1 of 1 message(s) will be retried",
  ]);
});
