/**
 * Consumer memory under a backlog of large messages: 5,000 messages of 100 KB reach a consumer
 * whose queue() handler holds every batch (as a slow or stuck consumer does), in full batches of
 * 100 (max_batch_timeout 1 s; with 0, batches would hold whatever one lease found). With no
 * budget the host would start batches up to max_concurrency (250), holding every body in Node
 * and in workerd at once; the host's budget of bytes in running batches (64 MiB by default)
 * stops it starting more. The figure is each process's peak resident memory (VmHWM), with the
 * budget against the same run with the budget lifted, in the same bench run. Linux only (/proc).
 * Run: npm run bench memory   (CELLD_BENCH_ROUNDS sets the rounds, 3 by default)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Pool } from "undici";
import { limits } from "@celld/queue-cell";
import { fmt, median } from "../packages/queue-cell/bench/bench-stats.ts";
import { spawnHost } from "./host-process.ts";
import { hostProcesses } from "./process-cpu.ts";

const rounds = Number(process.env.CELLD_BENCH_ROUNDS ?? 3);
const messages = 5_000;
const messageBytes = 100_000;
/** Two 100 KB messages fit one sendBatch (256 KB). */
const perCall = 2;
const callsInFlight = 8;
/** After the last send, how long batches may keep starting before the peaks are read. */
const settleMs = 3_000;
const unlimited = 1e12;

interface Peaks {
  nodeMb: number;
  workerdMb: number;
}

export async function runMemoryBench(log: (line: string) => void = console.log): Promise<void> {
  const budgetMb = limits.consumerBatchBytesInFlightMax / 1024 / 1024;
  log(
    `consumer memory: ${fmt(messages)} messages of ${fmt(messageBytes)} bytes to a consumer that holds every batch ` +
      `(max_batch_size 100, max_concurrency 250); peak resident memory (VmHWM) of the host's Node process and its workerd; ` +
      `budget of bytes in running batches ${budgetMb} MiB vs lifted; ${rounds} rounds, medians`,
  );
  const withBudget: Peaks[] = [];
  const lifted: Peaks[] = [];
  for (let round = 0; round < rounds; round++) {
    const a = await measure(undefined);
    const b = await measure(unlimited);
    withBudget.push(a);
    lifted.push(b);
    log(`  round ${round + 1}: budget Node ${fmt(a.nodeMb)} MB, workerd ${fmt(a.workerdMb)} MB | lifted Node ${fmt(b.nodeMb)} MB, workerd ${fmt(b.workerdMb)} MB`);
  }
  const med = (list: Peaks[], pick: (p: Peaks) => number) => median(list.map(pick));
  for (const [name, pick] of [["Node", (p: Peaks) => p.nodeMb], ["workerd", (p: Peaks) => p.workerdMb]] as const) {
    const ours = med(withBudget, pick);
    const baseline = med(lifted, pick);
    log(`  peak ${name} memory: ${fmt(ours)} MB vs baseline (budget lifted) ${fmt(baseline)} MB -> ratio ${(ours / baseline).toFixed(2)} (lower is better)`);
  }
}

async function measure(budgetBytes: number | undefined): Promise<Peaks> {
  const host = await spawnHost("celld", join(import.meta.dirname, "celld-memory-host.ts"), {
    env: { CELLD_BENCH_BATCH_BYTES: budgetBytes === undefined ? undefined : String(budgetBytes) },
  });
  const pool = new Pool(host.url, { connections: callsInFlight });
  try {
    let next = 0;
    const calls = messages / perCall;
    const sender = async (): Promise<void> => {
      while (next < calls) {
        next += 1;
        const { statusCode, body } = await pool.request({ method: "POST", path: `/send?n=${perCall}&bytes=${messageBytes}` });
        const text = await body.text();
        if (statusCode !== 200) throw new Error(`send answered ${statusCode}: ${text.slice(0, 300)}`);
      }
    };
    await Promise.all(Array.from({ length: callsInFlight }, sender));
    await sleep(settleMs);
    const peaks = peakMemory(host.pid);
    const { body } = await pool.request({ method: "POST", path: "/open-gate" });
    await body.text();
    await host.untilConsumed(messages, 120_000);
    return peaks;
  } finally {
    await pool.close();
    await host.stop();
  }
}

/** VmHWM of the process and of every workerd under it, in MB. */
function peakMemory(rootPid: number): Peaks {
  const hwm = (pid: number): number => {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match === null ? 0 : Number(match[1]) / 1024;
  };
  const tree = hostProcesses(rootPid);
  if (tree === undefined) throw new Error(`the host (pid ${rootPid}) is not in /proc: this bench needs Linux`);
  return { nodeMb: hwm(rootPid), workerdMb: tree.workerd.reduce((sum, pid) => sum + hwm(pid), 0) };
}
