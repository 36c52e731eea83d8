import { describe, expect, it } from "vitest";
import { parseTailFilters, tailEventPasses, type TailFilter } from "../src/cloudflare-api/tail-filter.ts";

/**
 * wrangler tail's filters over trace events shaped as workerd makes them for celld's tail Worker
 * (a request's as captured from `wrangler tail --format json` against `celld serve`, plus the
 * CF-Connecting-IP a proxy in front adds; a queue batch's and a cron run's as workerd's TraceItem
 * has them). The filter bodies are what wrangler 4.86's
 * translateCLICommandToFilterMessage sends for each flag.
 */

function requestEvent(method: string, outcome: string, logs: unknown[][] = [], ip = "127.0.0.1"): Record<string, unknown> {
  return {
    wallTime: 0,
    cpuTime: 0,
    truncated: false,
    executionModel: "stateless",
    outcome,
    scriptName: "hello",
    diagnosticsChannelEvents: [],
    exceptions: outcome === "exception" ? [{ name: "Error", message: "boom", timestamp: 1 }] : [],
    logs: logs.map((message) => ({ message, level: "log", timestamp: 1 })),
    eventTimestamp: 1765078000000,
    event: {
      request: {
        url: "http://127.0.0.1:37559/path",
        method,
        headers: { accept: "*/*", "cf-connecting-ip": ip, "content-type": "text/plain;charset=UTF-8", host: "127.0.0.1:37559", "user-agent": "curl/8.5.0" },
      },
      response: { status: outcome === "ok" ? 200 : 500 },
    },
  };
}

const queueEvent = { outcome: "ok", scriptName: "hello", logs: [{ message: ["batch of 3"], level: "log", timestamp: 1 }], exceptions: [], eventTimestamp: 1, event: { batchSize: 3, queue: "jobs" } };
const cronEvent = { outcome: "exception", scriptName: "hello", logs: [], exceptions: [], eventTimestamp: 1, event: { cron: "* * * * *", scheduledTime: 1 } };

const passes = (body: unknown, event: unknown, self = "127.0.0.1"): boolean => tailEventPasses(parseTailFilters(body, self), event);

describe("wrangler tail's filters", () => {
  it("passes everything with no filters (wrangler sends {filters: []})", () => {
    for (const event of [requestEvent("GET", "ok"), queueEvent, cronEvent]) expect(passes({ filters: [] }, event)).toBe(true);
    expect(passes(undefined, queueEvent)).toBe(true);
  });

  it("--status: the event's outcome; error is exception, exceededCpu, exceededMemory, unknown", () => {
    const error = { filters: [{ outcome: ["exception", "exceededCpu", "exceededMemory", "unknown"] }] };
    expect(passes(error, requestEvent("GET", "exception"))).toBe(true);
    expect(passes(error, requestEvent("GET", "exceededCpu"))).toBe(true);
    expect(passes(error, requestEvent("GET", "ok"))).toBe(false);
    expect(passes(error, cronEvent)).toBe(true);
    expect(passes(error, queueEvent)).toBe(false);
    expect(passes({ filters: [{ outcome: ["ok", "canceled"] }] }, requestEvent("GET", "canceled"))).toBe(true);
  });

  it("--method: any of the methods, any case; events without a request do not pass", () => {
    const body = { filters: [{ method: ["post", "PUT"] }] };
    expect(passes(body, requestEvent("POST", "ok"))).toBe(true);
    expect(passes(body, requestEvent("PUT", "ok"))).toBe(true);
    expect(passes(body, requestEvent("GET", "ok"))).toBe(false);
    expect(passes(body, queueEvent)).toBe(false);
  });

  it("--header: the header is there (any case of its name), and has the value when one is given", () => {
    expect(passes({ filters: [{ header: { key: "User-Agent" } }] }, requestEvent("GET", "ok"))).toBe(true);
    expect(passes({ filters: [{ header: { key: "user-agent", query: "curl/8.5.0" } }] }, requestEvent("GET", "ok"))).toBe(true);
    expect(passes({ filters: [{ header: { key: "user-agent", query: "Mozilla" } }] }, requestEvent("GET", "ok"))).toBe(false);
    expect(passes({ filters: [{ header: { key: "x-missing" } }] }, requestEvent("GET", "ok"))).toBe(false);
  });

  it("--ip: the client's address (CF-Connecting-IP), or self: the address that made the tail", () => {
    expect(passes({ filters: [{ client_ip: ["10.0.0.9", "127.0.0.1"] }] }, requestEvent("GET", "ok"))).toBe(true);
    expect(passes({ filters: [{ client_ip: ["10.0.0.9"] }] }, requestEvent("GET", "ok"))).toBe(false);
    expect(passes({ filters: [{ client_ip: ["self"] }] }, requestEvent("GET", "ok"), "::ffff:127.0.0.1")).toBe(true);
    expect(passes({ filters: [{ client_ip: ["self"] }] }, requestEvent("GET", "ok", [], "10.0.0.9"), "127.0.0.1")).toBe(false);
  });

  it("--search: text in a console message, whatever the event", () => {
    const body = { filters: [{ query: "of 3" }] };
    expect(passes(body, queueEvent)).toBe(true);
    expect(passes(body, requestEvent("GET", "ok", [["user", { id: "of 3" }]]))).toBe(true);
    expect(passes(body, requestEvent("GET", "ok", [["nothing here"]]))).toBe(false);
    expect(passes(body, cronEvent)).toBe(false);
  });

  it("all filters given must match", () => {
    const body = { filters: [{ outcome: ["ok"] }, { method: ["POST"] }, { query: "saved" }] };
    expect(passes(body, requestEvent("POST", "ok", [["saved 1"]]))).toBe(true);
    expect(passes(body, requestEvent("POST", "exception", [["saved 1"]]))).toBe(false);
    expect(passes(body, requestEvent("GET", "ok", [["saved 1"]]))).toBe(false);
    expect(passes(body, requestEvent("POST", "ok", [["other"]]))).toBe(false);
  });

  it("--sampling-rate: an event is kept when the draw is under the rate", () => {
    const filter: TailFilter = parseTailFilters({ filters: [{ sampling_rate: 0.25 }] }, undefined);
    expect(tailEventPasses(filter, queueEvent, () => 0.1)).toBe(true);
    expect(tailEventPasses(filter, queueEvent, () => 0.25)).toBe(false);
    let draws = 0;
    const seq = [0.9, 0.05, 0.5, 0.2];
    const kept = seq.filter(() => tailEventPasses(filter, queueEvent, () => seq[draws++]!)).length;
    expect(kept).toBe(2);
  });

  it("refuses bad filters, naming the field and the rule", () => {
    expect(() => parseTailFilters({ filters: {} }, undefined)).toThrow(/filters must be an array/);
    expect(() => parseTailFilters({ filters: [{ sampling_rate: 2 }] }, undefined)).toThrow(/filters\[0\]\.sampling_rate must be a number above 0 and at most 1, got 2/);
    expect(() => parseTailFilters({ filters: [{ outcome: "ok" }] }, undefined)).toThrow(/filters\[0\]\.outcome must be a non-empty array of strings/);
    expect(() => parseTailFilters({ filters: [{ method: [] }] }, undefined)).toThrow(/filters\[0\]\.method must be a non-empty array/);
    expect(() => parseTailFilters({ filters: [{ header: { query: "x" } }] }, undefined)).toThrow(/filters\[0\]\.header\.key must be a header name/);
    expect(() => parseTailFilters({ filters: [{ query: 3 }] }, undefined)).toThrow(/filters\[0\]\.query must be a string/);
    expect(() => parseTailFilters({ filters: [{ colour: "red" }] }, undefined)).toThrow(/filters\[0\]\.colour is not a tail filter/);
    expect(() => parseTailFilters({ filters: [7] }, undefined)).toThrow(/filters\[0\] must be an object/);
  });
});
