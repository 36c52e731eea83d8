/**
 * One run of `npm run bench threads-host`: a celld started for it (celld-threads-host.ts) with
 * `queues` queues and `cellThreads` cell threads; one request per queue at once, each awaiting
 * `calls` sendBatch(100) one after another, first request to last ack; after a short pass that
 * warms the new host up. Beside the rate, the CPU of the host's threads (/proc/PID/task: the main
 * thread, and the others, busiest first: cell threads, libuv's pool, V8's helpers, unnamed on
 * Node 20) and of its workerd.
 */
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { spawnHost, type HostProcess } from "./host-process.ts";
import { hostCpuSeconds } from "./process-cpu.ts";
import { threadsCpu, totalMs, type CpuMs } from "./thread-cpu.ts";
import { hostBatchMessages } from "./threads-host-workers.ts";

const callsPerQueue = 100;
const warmUpCalls = 10;
const drainTimeoutMs = 120_000;

export interface HostRunFigures {
  queues: number;
  cellThreads: number;
  seconds: number;
  /** Messages per second, first request to last ack. */
  endToEnd: number;
  /** Messages per second, first request to last answer. */
  sent: number;
  /** CPU ms in the pass: the host's main thread, its other threads (busiest first), its workerd; undefined without /proc. */
  cpu: { mainMs: number; otherThreadsMs: number[]; workerdMs: number } | undefined;
}

export async function measureHostRun(queues: number, cellThreads: number): Promise<HostRunFigures> {
  const host = await spawnHost("celld", join(import.meta.dirname, "celld-threads-host.ts"), {
    env: { CELLD_BENCH_THREADS_QUEUES: String(queues), CELLD_BENCH_CELL_THREADS: String(cellThreads) },
  });
  const pool = new Pool(host.url, { connections: queues, headersTimeout: 120_000, bodyTimeout: 120_000 });
  try {
    await pass(host, pool, queues, warmUpCalls);
    const before = cpuSnapshot(host.pid);
    const figures = await pass(host, pool, queues, callsPerQueue);
    const after = cpuSnapshot(host.pid);
    return { queues, cellThreads, ...figures, cpu: before && after && cpuBetween(host.pid, before, after) };
  } finally {
    await pool.close();
    await host.stop();
  }
}

/** Every queue's request at once; resolves once the host reports every message acked. */
async function pass(host: HostProcess, pool: Pool, queues: number, calls: number): Promise<{ seconds: number; endToEnd: number; sent: number }> {
  const messages = queues * calls * hostBatchMessages;
  const target = (await host.consumedCount()) + messages;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: queues }, async (_, q) => {
      const { statusCode, body } = await pool.request({ method: "POST", path: `/send-batches?q=${q}&calls=${calls}&n=${hostBatchMessages}` });
      const text = await body.text();
      if (statusCode !== 200) throw new Error(`celld: queue ${q}'s request answered ${statusCode}: ${text.slice(0, 300)}`);
    }),
  );
  const sentAt = performance.now();
  const ackedAt = await host.untilConsumed(target, drainTimeoutMs);
  return { seconds: (ackedAt - start) / 1000, endToEnd: messages / ((ackedAt - start) / 1000), sent: messages / ((sentAt - start) / 1000) };
}

interface CpuSnapshot {
  threads: Map<number, CpuMs>;
  workerdMs: number;
}

function cpuSnapshot(pid: number): CpuSnapshot | undefined {
  const threads = threadsCpu(pid);
  const tree = hostCpuSeconds(pid);
  return threads && tree && { threads, workerdMs: tree.workerd * 1000 };
}

function cpuBetween(pid: number, before: CpuSnapshot, after: CpuSnapshot): NonNullable<HostRunFigures["cpu"]> {
  // A thread started during the pass counts from zero; one that ended during it is not seen.
  const used = (tid: number): number => totalMs(after.threads.get(tid)!) - (before.threads.has(tid) ? totalMs(before.threads.get(tid)!) : 0);
  const others = [...after.threads.keys()].filter((tid) => tid !== pid).map(used).filter((ms) => ms > 0);
  return { mainMs: used(pid), otherThreadsMs: others.sort((a, b) => b - a), workerdMs: after.workerdMs - before.workerdMs };
}
