/**
 * What the front door costs a producer that is not an empty request (issue 34): warm
 * sendBatch(100) passes, 4 calls in flight, end to end through a consumer, alternately through
 * celld's `--port` and straight to workerd's socket for the Worker, on one host. At 50 empty
 * requests in flight (front-door.ts) the front's work shares turns of the event loop; at 4 each
 * hop of each request is a turn of its own, and the front cost several times more a request
 * (docs/performance.md#what-the-front-costs-a-sendbatch-the-regression-of-2026-12-07).
 */
import type { HostProcess } from "./host-process.ts";
import { driver, endToEnd, type Driver } from "./host-workloads.ts";

const perBatch = 100;
const calls = 100;
const inFlight = 4;
const warmPasses = 2;
const pairs = 6;

export interface FrontDoorBatches {
  /** celld's Node CPU per message, µs, medians of the pairs: through the front, direct, and the pairs' differences. */
  frontNodeUs: number;
  directNodeUs: number;
  addedNodeUs: number;
  /** End to end msg/s, medians. */
  frontRate: number;
  directRate: number;
}

export async function frontDoorBatches(host: HostProcess, median: (values: number[]) => number): Promise<FrontDoorBatches | undefined> {
  const directUrl = host.directUrl;
  if (directUrl === undefined) return undefined;
  // The direct driver asks the same host about its consumption and its event loop.
  const directHost: HostProcess = Object.create(host, { url: { value: directUrl } });
  const front = driver(host, inFlight);
  const direct = driver(directHost, inFlight);
  const pass = (d: Driver) => endToEnd(d, `/send-batch?n=${perBatch}`, calls, perBatch, inFlight);
  try {
    for (let i = 0; i < warmPasses; i++) {
      await pass(front);
      await pass(direct);
    }
    const f: Array<{ node: number; rate: number }> = [];
    const d: Array<{ node: number; rate: number }> = [];
    for (let i = 0; i < pairs; i++) {
      for (const [which, into] of [[front, f], [direct, d]] as const) {
        const t = await pass(which);
        if (t.cpuPerMessageUs === undefined) return undefined;
        into.push({ node: t.cpuPerMessageUs.node, rate: t.endToEnd });
      }
    }
    return {
      frontNodeUs: median(f.map((x) => x.node)),
      directNodeUs: median(d.map((x) => x.node)),
      addedNodeUs: median(f.map((x, i) => x.node - d[i]!.node)),
      frontRate: median(f.map((x) => x.rate)),
      directRate: median(d.map((x) => x.rate)),
    };
  } finally {
    await front.pool.close();
    await direct.pool.close();
  }
}

export function frontDoorBatchesLine(rounds: readonly FrontDoorBatches[], median: (values: number[]) => number): string {
  if (rounds.length === 0) return "  the front door under sendBatch: not measured (no direct URL, or no /proc)";
  const med = (pick: (f: FrontDoorBatches) => number) => median(rounds.map(pick));
  const us = (n: number) => `${n.toFixed(1)} µs`;
  return (
    `  the front door under sendBatch(${perBatch}), ${inFlight} in flight, end to end, alternated in ${pairs} pairs: ` +
    `${Math.round(med((f) => f.frontRate))} vs ${Math.round(med((f) => f.directRate))} msg/s; celld's Node CPU a message ` +
    `${us(med((f) => f.frontNodeUs))} through the front, ${us(med((f) => f.directNodeUs))} direct: the front adds ` +
    `${us(med((f) => f.addedNodeUs))} (the median of the pairs' differences)`
  );
}
