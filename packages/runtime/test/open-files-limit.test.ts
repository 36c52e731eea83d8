import { expect, test } from "vitest";
import { limits } from "@celld/queue-cell";
import { openCellsLoweredMessage, openCellsMaxFor, openFilesSoftLimit, readOpenFilesLimit } from "../src/host/open-files-limit.ts";

/** /proc/self/limits as Linux prints it, with `openFiles` as the soft and hard "Max open files". */
function limitsText(soft: string, hard: string): string {
  const row = (name: string, s: string, h: string, unit: string) => `${name.padEnd(26)}${s.padEnd(21)}${h.padEnd(21)}${unit.padEnd(10)}`;
  return [
    row("Limit", "Soft Limit", "Hard Limit", "Units"),
    row("Max cpu time", "unlimited", "unlimited", "seconds"),
    row("Max processes", "96362", "96362", "processes"),
    row("Max open files", soft, hard, "files"),
    row("Max locked memory", "8388608", "8388608", "bytes"),
    "",
  ].join("\n");
}

test("the soft open-files limit is read from the limits text; unlimited or missing is unknown", () => {
  expect(openFilesSoftLimit(limitsText("4096", "524288"))).toBe(4096);
  expect(openFilesSoftLimit(limitsText("unlimited", "unlimited"))).toBeUndefined();
  expect(openFilesSoftLimit("Limit Soft Limit Hard Limit Units\n")).toBeUndefined();
});

test("open cells take at most half the limit, at about 5 descriptors each, and never more than openCellsMax", () => {
  const bound = (soft: string) => openCellsMaxFor(openFilesSoftLimit(limitsText(soft, soft)));
  // 4,096 ran out at about 800 queues under the fixed 1,000.
  expect(bound("4096")).toBe(409);
  expect(bound("1024")).toBe(102);
  expect(bound("10000")).toBe(limits.openCellsMax);
  expect(bound("1048576")).toBe(limits.openCellsMax);
  expect(bound("unlimited")).toBe(limits.openCellsMax);
  // A limit too small for even one cell's share still lets one queue open.
  expect(bound("4")).toBe(1);
  expect(openCellsMaxFor(undefined)).toBe(limits.openCellsMax);
});

test("the line for a lowered bound names the limit, the bound and how to raise the limit", () => {
  expect(openCellsLoweredMessage(4096, 409)).toBe(
    "the open-files limit is 4096, so at most 409 queues stay open at once, not 1000 (each holds about 5 descriptors; " +
      "idle ones close and reopen on use); to keep more open, raise the limit: ulimit -n before celld, or LimitNOFILE= in its systemd unit",
  );
});

test.runIf(process.platform === "linux")("this process's limit is read from /proc/self/limits", () => {
  expect(readOpenFilesLimit()).toBeGreaterThan(0);
});
