import { expect, test } from "vitest";
import { BackgroundWorkError, CellError } from "@celld/queue-cell";
import { logCellBackgroundError, type HostLog } from "../src/host/host-log.ts";

/** Keeps what each error line was given, its error (whose stack the console log prints) included. */
function capturingLog(): { log: HostLog; errors: Array<[string, unknown]> } {
  const errors: Array<[string, unknown]> = [];
  const log: HostLog = { info: () => {}, warn: () => {}, runtime: () => {}, error: (message, error) => void errors.push([message, error]) };
  return { log, errors };
}

test("a cell's failed background work is one line naming the queue and the work; a storage failure comes without a stack", () => {
  const { log, errors } = capturingLog();
  const full = new CellError("ERR_STORAGE", "the queue's storage failed: database or disk is full (SQLITE_FULL); nothing of this call was written", {
    storage: { queue: "jobs-dlq", cause: "disk-full", detail: "SQLITE_FULL: database or disk is full", mayHaveTakenEffect: false, writesStopped: false },
  });
  logCellBackgroundError(log, new BackgroundWorkError("jobs", 'moving dead letters to "jobs-dlq"', "tried again in 4 s", full));
  const bug = new TypeError("rows is not iterable");
  logCellBackgroundError(log, new BackgroundWorkError("jobs", 'moving dead letters to "jobs-dlq"', "tried again in 1 s", bug));
  expect(errors).toEqual([
    ['queue "jobs": moving dead letters to "jobs-dlq" failed, tried again in 4 s: the storage of queue "jobs-dlq" failed (SQLITE_FULL: database or disk is full)', undefined],
    // A bug keeps its stack: the error itself goes with the line.
    ['queue "jobs": moving dead letters to "jobs-dlq" failed, tried again in 1 s: rows is not iterable', bug],
  ]);
});
