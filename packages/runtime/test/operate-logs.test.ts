import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import type { BatchReport } from "@celld/bindings";
import { UsageError, parseDevArgs, usage } from "../src/cli/args.ts";
import { MemoryHostLog } from "../src/host/host-log.ts";
import { ActivityLog } from "../src/logs/activity-log.ts";
import { batchLine, requestLine } from "../src/logs/activity-lines.ts";
import { JsonHostLog } from "../src/logs/json-log.ts";

function refusal(parse: () => unknown): string {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error("the arguments were accepted");
}

const batch = (extra: Partial<BatchReport> = {}): BatchReport => ({
  queue: "jobs",
  size: 10,
  acked: 10,
  retried: 0,
  deadLettered: 0,
  outcome: "ok",
  durationMs: 9.4,
  ackedAgesMs: [],
  ...extra,
});

describe("celld dev's log options", () => {
  const cwd = mkdtempSync(join(tmpdir(), "celld-args-"));
  writeFileSync(join(cwd, "wrangler.toml"), 'name = "w"\nmain = "index.js"\n');
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  test("--log-requests and --metrics-public are off unless given; --log-format is text unless json", () => {
    const plain = parseDevArgs([], cwd);
    expect([plain.logRequests, plain.logFormat, plain.metricsPublic]).toEqual([false, "text", false]);
    const on = parseDevArgs(["--log-requests", "--log-format", "json", "--api-port", "0", "--metrics-public"], cwd);
    expect([on.logRequests, on.logFormat, on.metricsPublic]).toEqual([true, "json", true]);
    expect(refusal(() => parseDevArgs(["--log-format", "yaml"], cwd))).toBe('--log-format must be text or json, got "yaml"');
    expect(refusal(() => parseDevArgs(["--metrics-public"], cwd))).toBe("--metrics-public needs --api-port: /metrics is served on the API port");
    for (const flag of ["--log-requests", "--log-format FORMAT", "--metrics-public"]) expect(usage).toContain(flag);
  });
});

describe("request and batch lines", () => {
  test("read as wrangler dev's", () => {
    expect(requestLine({ method: "GET", url: "/jobs?x=1", status: 202, durationMs: 3.2 })).toBe("GET /jobs?x=1 202 Accepted (3ms)");
    expect(requestLine({ method: "POST", url: "/", status: 599, durationMs: 0 })).toBe("POST / 599 (0ms)");
    expect(batchLine(batch())).toBe("QUEUE jobs 10/10 (9ms)");
    expect(batchLine(batch({ acked: 7, retried: 2, deadLettered: 1, outcome: "exception" }))).toBe(
      "QUEUE jobs 7/10 (9ms) 2 retried, 1 dead-lettered, outcome exception",
    );
  });

  test("go through the host's log as text, or as JSON objects with their fields", () => {
    const text = new MemoryHostLog();
    new ActivityLog(text).batch(batch());
    expect(text.lines).toEqual(["info: QUEUE jobs 10/10 (9ms)"]);

    const written: Array<[string, string]> = [];
    const json = new JsonHostLog((stream, line) => written.push([stream, line]), () => new Date(Date.UTC(2026, 0, 1)));
    const activity = new ActivityLog(json);
    activity.request({ method: "GET", url: "/jobs", status: 202, durationMs: 3, worker: "api" });
    activity.batch(batch({ acked: 9, retried: 1 }));
    json.warn("a warning");
    json.error("it failed", new TypeError("bad"));
    json.runtime("hello from a Worker", "stdout");
    const objects = written.map(([stream, line]) => [stream, JSON.parse(line)]);
    expect(objects).toEqual([
      ["stdout", { level: "info", time: "2026-01-01T00:00:00.000Z", message: "GET /jobs 202 Accepted (3ms)", worker: "api", method: "GET", url: "/jobs", status: 202, duration_ms: 3 }],
      [
        "stdout",
        {
          level: "info",
          time: "2026-01-01T00:00:00.000Z",
          message: "QUEUE jobs 9/10 (9ms) 1 retried",
          queue: "jobs",
          size: 10,
          acked: 9,
          retried: 1,
          dead_lettered: 0,
          outcome: "ok",
          duration_ms: 9,
        },
      ],
      ["stderr", { level: "warn", time: "2026-01-01T00:00:00.000Z", message: "a warning" }],
      ["stderr", { level: "error", time: "2026-01-01T00:00:00.000Z", message: "it failed", error: { name: "TypeError", message: "bad", stack: expect.stringContaining("TypeError: bad") } }],
      ["stdout", { level: "info", time: "2026-01-01T00:00:00.000Z", message: "hello from a Worker", source: "worker", stream: "stdout" }],
    ]);
    expect(written.every(([, line]) => !line.includes("\n"))).toBe(true);
  });
});
