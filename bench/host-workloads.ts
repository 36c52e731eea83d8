/**
 * The host bench's three workloads, driven over HTTP from the bench process against a host in
 * its own process (host-process.ts). Every loop is bounded in time; a host that stalls fails the
 * bench with a message saying how far it got.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Pool } from "undici";
import type { HostProcess, StageSample } from "./host-process.ts";
import { hostCpuSeconds, type CpuSeconds } from "./process-cpu.ts";

const drainTimeoutMs = 60_000;

export interface Driver {
  host: HostProcess;
  pool: Pool;
  /** Sending requests sent again after their connection was reset (see sendAgainOnReset). */
  resends: number;
  firstReset: string | undefined;
}

/** Fresh connections for each use: a pool left idle while the other host ran is not reused. */
export function driver(host: HostProcess, connections: number): Driver {
  return {
    host,
    pool: new Pool(host.url, { connections, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 }),
    resends: 0,
    firstReset: undefined,
  };
}

async function post(d: Driver, path: string): Promise<string> {
  const { statusCode, body } = await d.pool.request({ path, method: "POST" });
  const text = await body.text();
  if (statusCode !== 200) {
    const error = new Error(`${d.host.name}: POST ${path} answered ${statusCode}: ${text.slice(0, 300)}`);
    // celld's front answers 502 where workerd reset the connection a send went out on: the same
    // event a client talking to workerd directly sees as ECONNRESET, and sent again alike.
    if (statusCode === 502 && text.startsWith("celld: the Worker")) Object.assign(error, { code: "UPSTREAM_RESET" });
    throw error;
  }
  return text;
}

const connectionErrors = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "UPSTREAM_RESET"]);

/**
 * A request whose connection was reset is sent once more, as a producer would: once in a long
 * run, workerd has reset a connection mid-request. Its first attempt may have sent its messages
 * already; the duplicates (at most one call's worth) are counted as consumed like any other, and
 * the resends are reported.
 */
async function sendAgainOnReset(d: Driver, path: string): Promise<void> {
  try {
    await post(d, path);
  } catch (error) {
    if (!connectionErrors.has((error as { code?: unknown }).code as string)) throw error;
    d.resends += 1;
    d.firstReset ??= `${new Date().toISOString()} POST ${path}: ${(error as Error).message}`;
    await post(d, path);
  }
}

export interface Throughput {
  /** Messages per second from the first request to the report that the last was consumed. */
  endToEnd: number;
  /** Messages per second from the first request to the last request's answer (sends only). */
  sent: number;
  /** The host's CPU time per message, µs, sending and consuming; undefined without /proc. */
  cpuPerMessageUs: CpuSeconds | undefined;
  /** This process's CPU time per message, µs: the HTTP client's share of the machine. */
  driverCpuPerMessageUs: number;
  /**
   * The share of the run the host's Node thread spent running rather than waiting for I/O:
   * under 1 while the host was held by something else (the other processes, the round trips).
   */
  loopBusy: number;
  /** Requests sent again after a connection reset, and what the first reset said. */
  resends: number;
  firstReset: string | undefined;
  /** celld: each send's stages in its Node process during the run (LoopTime.stages). */
  stages: StageSample[];
}

/** `calls` requests to `path`, each sending `perCall` messages, `inFlight` requests at a time. */
export async function endToEnd(d: Driver, path: string, calls: number, perCall: number, inFlight: number): Promise<Throughput> {
  const messages = calls * perCall;
  const target = (await d.host.consumedCount()) + messages;
  const resendsBefore = d.resends;
  d.firstReset = undefined;
  const loopBefore = await d.host.loopTime();
  const cpuBefore = hostCpuSeconds(d.host.pid);
  const driverBefore = process.cpuUsage();
  const start = performance.now();
  let issued = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (issued < calls) {
        issued++;
        await sendAgainOnReset(d, path);
      }
    }),
  );
  const sentAt = performance.now();
  const consumedAt = await d.host.untilConsumed(target, drainTimeoutMs);
  const cpuAfter = hostCpuSeconds(d.host.pid);
  const loopAfter = await d.host.loopTime();
  const loopActive = loopAfter.active - loopBefore.active;
  const driverCpu = process.cpuUsage(driverBefore);
  const perMessageUs = (before: number, after: number) => ((after - before) * 1e6) / messages;
  return {
    endToEnd: messages / ((consumedAt - start) / 1000),
    sent: messages / ((sentAt - start) / 1000),
    cpuPerMessageUs:
      cpuBefore === undefined || cpuAfter === undefined
        ? undefined
        : { node: perMessageUs(cpuBefore.node, cpuAfter.node), workerd: perMessageUs(cpuBefore.workerd, cpuAfter.workerd) },
    driverCpuPerMessageUs: (driverCpu.user + driverCpu.system) / messages,
    loopBusy: loopActive / (loopActive + loopAfter.idle - loopBefore.idle),
    resends: d.resends - resendsBefore,
    firstReset: d.firstReset,
    stages: loopAfter.stages ?? [],
  };
}

export interface LatencySample {
  /** HTTP round trip seen from the bench, ms, one per answered request. */
  roundTripMs: number[];
  /** What the Worker's own clock said around `await env.JOBS.send()`, ms (coarse). */
  inWorkerMs: number[];
  /** Answered requests per second, first request to last answer: below the offered rate, the host is saturated. */
  answeredPerSecond: number;
  failures: number;
  firstFailure: string | undefined;
}

/**
 * Open-loop pacing: `ratePerSecond` requests to `path` for `durationMs`, each started on schedule
 * whether or not earlier ones have answered (a slow answer does not slow the offered load).
 * Failed requests are counted, not thrown: a refused send is a finding, not a broken bench.
 */
export async function paced(d: Driver, path: string, ratePerSecond: number, durationMs: number): Promise<LatencySample> {
  const total = Math.round((ratePerSecond * durationMs) / 1000);
  const sample: LatencySample = { roundTripMs: [], inWorkerMs: [], answeredPerSecond: 0, failures: 0, firstFailure: undefined };
  const pending = new Set<Promise<void>>();
  const start = performance.now();
  let issued = 0;
  while (issued < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) * ratePerSecond) / 1000) + 1);
    for (; issued < due; issued++) {
      const sent = performance.now();
      const request = post(d, path).then(
        (text) => {
          sample.roundTripMs.push(performance.now() - sent);
          if (text !== "") sample.inWorkerMs.push(Number(text));
        },
        (error: unknown) => {
          sample.failures += 1;
          sample.firstFailure ??= error instanceof Error ? error.message : String(error);
        },
      );
      pending.add(request);
      void request.finally(() => pending.delete(request));
    }
    // Node's 1 ms timer fires a little late; the schedule above catches up, so the rate holds.
    await sleep(1);
  }
  await Promise.all(pending);
  sample.answeredPerSecond = sample.roundTripMs.length / ((performance.now() - start) / 1000);
  return sample;
}

/** Waits until the host has consumed `count` more messages than `from` (a drain between runs). */
export async function drained(d: Driver, from: number, count: number): Promise<void> {
  await d.host.untilConsumed(from + count, drainTimeoutMs);
}

/** The nearest-rank percentile, `p` from 0 to 100. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
