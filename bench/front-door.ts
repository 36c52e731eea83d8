/**
 * What the front door costs a request (issue 35): the same empty request (`/noop`) sent to celld's
 * `--port`, through the Node front that routes and holds the connection limits, and straight to
 * the socket where workerd serves the Worker behind it, on the same host in the same round.
 * Alternated (front, direct, front, direct) so that the machine's drift falls on both; CPU per
 * request split into the host's Node process (where the front runs) and its workerd.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Pool } from "undici";
import type { HostProcess } from "./host-process.ts";
import { percentile } from "./host-workloads.ts";
import { hostCpuSeconds, type CpuSeconds } from "./process-cpu.ts";

const requests = 5_000;
const inFlight = 50;
const pacedRate = 1_000;
const pacedMs = 3_000;

export interface EmptyRequests {
  perSecond: number;
  /** Host CPU per request, µs; undefined without /proc. */
  cpuUs: CpuSeconds | undefined;
  p50: number;
  p99: number;
}

export interface FrontDoorFigures {
  front: EmptyRequests;
  direct: EmptyRequests;
}

async function get(pool: Pool): Promise<void> {
  const { statusCode, body } = await pool.request({ path: "/noop", method: "GET" });
  await body.dump();
  if (statusCode !== 200) throw new Error(`/noop answered ${statusCode}`);
}

async function saturated(host: HostProcess, pool: Pool): Promise<{ perSecond: number; cpuUs: CpuSeconds | undefined }> {
  const before = hostCpuSeconds(host.pid);
  const start = performance.now();
  let issued = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (issued < requests) {
        issued++;
        await get(pool);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const after = hostCpuSeconds(host.pid);
  const us = (a: number, b: number) => ((b - a) * 1e6) / requests;
  return {
    perSecond: requests / seconds,
    cpuUs: before === undefined || after === undefined ? undefined : { node: us(before.node, after.node), workerd: us(before.workerd, after.workerd) },
  };
}

async function paced(pool: Pool): Promise<{ p50: number; p99: number }> {
  const total = (pacedRate * pacedMs) / 1000;
  const times: number[] = [];
  const pending: Promise<void>[] = [];
  const start = performance.now();
  for (let issued = 0; issued < total; ) {
    const due = Math.min(total, Math.floor(((performance.now() - start) * pacedRate) / 1000) + 1);
    for (; issued < due; issued++) {
      const sent = performance.now();
      pending.push(get(pool).then(() => void times.push(performance.now() - sent)));
    }
    await sleep(1);
  }
  await Promise.all(pending);
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

async function once(host: HostProcess, url: URL): Promise<EmptyRequests> {
  const pool = new Pool(url, { connections: inFlight, pipelining: 1 });
  try {
    await saturated(host, pool); // warm: JIT, the front's pooled sockets into workerd
    const run = await saturated(host, pool);
    return { ...run, ...(await paced(pool)) };
  } finally {
    await pool.close();
  }
}

/** Front and direct, twice each, alternated; each figure the mean of its two. */
export async function frontDoorCost(host: HostProcess): Promise<FrontDoorFigures | undefined> {
  if (host.directUrl === undefined) return undefined;
  const runs = { front: [] as EmptyRequests[], direct: [] as EmptyRequests[] };
  for (const which of ["front", "direct", "front", "direct"] as const) runs[which].push(await once(host, which === "front" ? host.url : host.directUrl));
  const mean = (rs: EmptyRequests[]): EmptyRequests => {
    const avg = (pick: (r: EmptyRequests) => number) => rs.reduce((n, r) => n + pick(r), 0) / rs.length;
    const cpu = rs.every((r) => r.cpuUs !== undefined) ? { node: avg((r) => r.cpuUs!.node), workerd: avg((r) => r.cpuUs!.workerd) } : undefined;
    return { perSecond: avg((r) => r.perSecond), cpuUs: cpu, p50: avg((r) => r.p50), p99: avg((r) => r.p99) };
  };
  return { front: mean(runs.front), direct: mean(runs.direct) };
}

/** The summary line: medians over the rounds. */
export function frontDoorLine(rounds: readonly FrontDoorFigures[], median: (values: number[]) => number): string {
  if (rounds.length === 0) return "  the front door: not measured (the host gave no direct URL)";
  const med = (pick: (f: FrontDoorFigures) => number) => median(rounds.map(pick));
  const us = (n: number) => `${Math.round(n)} µs`;
  const ms = (n: number) => `${n.toFixed(2)} ms`;
  const cpu = rounds.every((r) => r.front.cpuUs !== undefined && r.direct.cpuUs !== undefined);
  const cpuText = cpu
    ? `; host CPU per request: front Node ${us(med((f) => f.front.cpuUs!.node))} + workerd ${us(med((f) => f.front.cpuUs!.workerd))}, ` +
      `direct Node ${us(med((f) => f.direct.cpuUs!.node))} + workerd ${us(med((f) => f.direct.cpuUs!.workerd))}: ` +
      `the front adds ${us(med((f) => f.front.cpuUs!.node + f.front.cpuUs!.workerd - f.direct.cpuUs!.node - f.direct.cpuUs!.workerd))}`
    : "";
  return (
    `  the front door: empty requests through celld's --port (Node front: routing, connection limits) vs straight to workerd's ` +
    `socket for the Worker, same host, alternated: ${inFlight} in flight ${Math.round(med((f) => f.front.perSecond))} vs ` +
    `${Math.round(med((f) => f.direct.perSecond))} req/s (ratio ${(med((f) => f.front.perSecond / f.direct.perSecond)).toFixed(2)})${cpuText}; ` +
    `at ${pacedRate}/s p50/p99 ${ms(med((f) => f.front.p50))}/${ms(med((f) => f.front.p99))} vs ` +
    `${ms(med((f) => f.direct.p50))}/${ms(med((f) => f.direct.p99))}`
  );
}

/**
 * `npm run bench front`: the front door's part of the host bench alone, on a celld host started
 * for it (rounds as CELLD_BENCH_ROUNDS, 3 by default), for a quick reading without the queue runs,
 * and then its cost under warm sendBatch passes (front-door-batches.ts).
 */
export async function runFrontDoorBench(log: (line: string) => void = console.log): Promise<void> {
  const { spawnHost } = await import("./host-process.ts");
  const { median } = await import("../packages/queue-cell/bench/bench-stats.ts");
  const { availableParallelism, loadavg } = await import("node:os");
  const rounds = Number(process.env.CELLD_BENCH_ROUNDS ?? 3);
  const { frontDoorBatches, frontDoorBatchesLine } = await import("./front-door-batches.ts");
  const figures: FrontDoorFigures[] = [];
  const batches: Array<NonNullable<Awaited<ReturnType<typeof frontDoorBatches>>>> = [];
  const [atStart] = loadavg();
  for (let round = 0; round < rounds; round++) {
    const host = await spawnHost("celld", new URL("./celld-host.ts", import.meta.url).pathname);
    try {
      const f = await frontDoorCost(host);
      if (f !== undefined) figures.push(f);
      const b = await frontDoorBatches(host, median);
      if (b !== undefined) batches.push(b);
    } finally {
      await host.stop();
    }
  }
  const [one] = loadavg();
  log(
    `front door: ${rounds} round(s), a fresh celld host each; load average ${atStart!.toFixed(2)} at the start, ` +
      `${one!.toFixed(2)} at the end, on ${availableParallelism()} cores`,
  );
  log(frontDoorLine(figures, median));
  log(frontDoorBatchesLine(batches, median));
}
