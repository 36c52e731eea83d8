/**
 * Memory with many queues: the host's resident memory (VmRSS, and its peak VmHWM) with 10,000
 * queues created through the native API and each sent one message, then with 1,000 of them busy
 * at once (sends, leases and acks on every one of them, round after round). The goal is at most
 * 1 GiB at 10,000 queues; the baseline is the same host just started, with no queue. Only the
 * queues' process is measured (cells, API, metrics): workerd holds nothing per queue. Linux only.
 * Run: npm run bench memory   (or npm run bench many-queues for this part alone)
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Pool } from "undici";
import { fmt } from "../packages/queue-cell/bench/bench-stats.ts";
import { createApiKey } from "../packages/runtime/src/api/index.ts";
import { spawnHost } from "./host-process.ts";

const queues = Number(process.env.CELLD_BENCH_QUEUES ?? 10_000);
const busyQueues = Math.min(queues, 1_000);
const busyRounds = 5;
const callsInFlight = 16;
const goalMb = 1024;
const env = "orgs/bench/projects/memory/envs/prod";

export async function runManyQueuesBench(log: (line: string) => void = console.log): Promise<void> {
  log(
    `many queues: ${fmt(queues)} queues created through the API, one message sent to each; then ${fmt(busyQueues)} of them busy ` +
      `(send, lease, ack on each, ${busyRounds} rounds, ${callsInFlight} calls in flight); resident memory of the queues' process`,
  );
  const dataDir = mkdtempSync(join(tmpdir(), "celld-many-queues-"));
  const { key } = createApiKey(dataDir, { env, scopes: ["events:publish", "events:write", "events:read"] });
  const host = await spawnHost("celld", join(import.meta.dirname, "celld-queues-host.ts"), { env: { CELLD_BENCH_DATA: dataDir } });
  const pool = new Pool(host.url, { connections: callsInFlight });
  /**
   * A connection reset or a 408 under load is tried again once; a create that had landed answers
   * 409 then.
   */
  const call = async (method: "POST" | "GET", path: string, body?: unknown, again = true): Promise<unknown> => {
    let res;
    try {
      res = await request(method, path, body);
    } catch (error) {
      if (!again || (error as NodeJS.ErrnoException).code !== "ECONNRESET") throw error;
      resets += 1;
      return call(method, path, body, false);
    }
    const text = await res.body.text();
    // 408: the server did not get the whole request in time (a loaded machine): nothing was done.
    if (res.statusCode === 408 && again) {
      resets += 1;
      return call(method, path, body, false);
    }
    if (res.statusCode === 409 && !again) return undefined;
    if (res.statusCode >= 300) throw new Error(`${method} ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
    return text === "" ? undefined : JSON.parse(text);
  };
  let resets = 0;
  const request = (method: "POST" | "GET", path: string, body?: unknown) =>
    pool.request({
      method,
      path,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  try {
    const empty = memory(host.pid);
    log(`  just started: RSS ${fmt(empty.rssMb)} MB`);
    const started = performance.now();
    let done = 0;
    await inParallel(queues, async (i) => {
      await call("POST", `/v1/${env}/queues`, { name: `q${i}` });
      await call("POST", `/v1/${env}/queues/q${i}:send`, { events: [event(i)] });
      done += 1;
      if (done % 2000 === 0 && done < queues) log(`    ${fmt(done)} queues: RSS ${fmt(memory(host.pid).rssMb)} MB`);
    });
    const created = memory(host.pid);
    const seconds = (performance.now() - started) / 1000;
    log(`  ${fmt(queues)} queues, one message each (${fmt(seconds)} s): RSS ${fmt(created.rssMb)} MB, peak ${fmt(created.hwmMb)} MB`);
    for (let round = 0; round < busyRounds; round++) {
      await inParallel(busyQueues, async (i) => {
        const path = `/v1/${env}/queues/q${i}`;
        await call("POST", `${path}:send`, { events: [event(i)] });
        const leased = (await call("POST", `${path}:lease`, { max_messages: 10 })) as { messages: Array<{ id: string; lease_generation: number }> };
        await call("POST", `${path}:ack`, { messages: leased.messages.map((m) => ({ id: m.id, lease_generation: m.lease_generation })) });
      });
    }
    const busy = memory(host.pid);
    log(`  ${fmt(busyQueues)} queues busy: RSS ${fmt(busy.rssMb)} MB, peak ${fmt(busy.hwmMb)} MB${resets === 0 ? "" : ` (${resets} connection resets, each tried again)`}`);
    const peak = busy.hwmMb;
    log(
      `  peak RSS with ${fmt(queues)} queues: ${fmt(peak)} MB vs goal ${goalMb} MB -> ratio ${(peak / goalMb).toFixed(2)} (at most 1 meets it); ` +
        `vs baseline (just started) ${fmt(empty.rssMb)} MB -> ratio ${(peak / empty.rssMb).toFixed(2)}`,
    );
  } finally {
    await pool.close();
    await host.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function event(i: number): Record<string, unknown> {
  return { specversion: "1.0", id: `e${i}-${Math.random().toString(36).slice(2)}`, source: "/bench", type: "bench.event", data: { i } };
}

/** Runs `task(0..n-1)` with callsInFlight at a time. */
async function inParallel(n: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) await task(next++);
  };
  await Promise.all(Array.from({ length: callsInFlight }, worker));
}

/** VmRSS and VmHWM of the process, MB. */
function memory(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  return { rssMb: kb("VmRSS") / 1024, hwmMb: kb("VmHWM") / 1024 };
}
