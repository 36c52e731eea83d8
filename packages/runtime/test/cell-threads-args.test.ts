import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { limits } from "@celld/queue-cell";
import { parseDevArgs } from "../src/cli/args.ts";
import { cellThreadsOf, cellThreadsVariable, SettingError } from "../src/cli/cell-threads.ts";
import { parseServeArgs } from "../src/cli/serve-args.ts";

function refusal(parse: () => unknown): string {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(SettingError);
    return (error as Error).message;
  }
  throw new Error("the value was accepted");
}

describe("--cell-threads and CELLD_CELL_THREADS", () => {
  const max = limits.cellThreadsMax;

  test("unset or empty: 0, the cells on the main thread", () => {
    expect(cellThreadsOf(undefined, {})).toBe(0);
    expect(cellThreadsOf(undefined, { [cellThreadsVariable]: "" })).toBe(0);
  });

  test("0 to the bound are taken, from the flag or the variable; the flag wins", () => {
    expect(cellThreadsOf("0", {})).toBe(0);
    expect(cellThreadsOf("2", {})).toBe(2);
    expect(cellThreadsOf(String(max), {})).toBe(max);
    expect(cellThreadsOf(undefined, { [cellThreadsVariable]: "3" })).toBe(3);
    expect(cellThreadsOf("1", { [cellThreadsVariable]: "3" })).toBe(1);
    // The flag wins even over a variable that would be refused: the command line is what was meant.
    expect(cellThreadsOf("1", { [cellThreadsVariable]: "lots" })).toBe(1);
  });

  test.each([String(max + 1), "-1", "1.5", "two", "", " 2", "0x2", "1e1"])("the flag %j is refused, naming the flag and the bound", (bad) => {
    expect(refusal(() => cellThreadsOf(bad, {}))).toBe(
      `--cell-threads must be a whole number from 0 (cells on the main thread) to ${max}, got ${JSON.stringify(bad)}`,
    );
  });

  test("a bad variable is refused naming the variable", () => {
    expect(refusal(() => cellThreadsOf(undefined, { [cellThreadsVariable]: String(max + 1) }))).toBe(
      `${cellThreadsVariable} must be a whole number from 0 (cells on the main thread) to ${max}, got "${max + 1}"`,
    );
  });

  test("celld dev takes them", () => {
    const cwd = mkdtempSync(join(tmpdir(), "celld-args-"));
    afterAll(() => rmSync(cwd, { recursive: true, force: true }));
    writeFileSync(join(cwd, "wrangler.toml"), 'name = "w"\nmain = "index.js"\n');
    expect(parseDevArgs([], cwd).cellThreads).toBe(0);
    expect(parseDevArgs(["--cell-threads", "2"], cwd).cellThreads).toBe(2);
    expect(parseDevArgs([], cwd, { [cellThreadsVariable]: "4" }).cellThreads).toBe(4);
    expect(refusal(() => parseDevArgs(["--cell-threads", String(max + 1)], cwd))).toMatch(/^--cell-threads must be/);
  });

  test("celld serve takes them as celld dev does", () => {
    expect(parseServeArgs([], "/srv").cellThreads).toBe(0);
    expect(parseServeArgs(["--cell-threads", "2"], "/srv").cellThreads).toBe(2);
    expect(parseServeArgs([], "/srv", { [cellThreadsVariable]: "4" }).cellThreads).toBe(4);
    expect(refusal(() => parseServeArgs(["--cell-threads", "-3"], "/srv"))).toMatch(/^--cell-threads must be .* to \d+, got "-3"$/);
  });
});
