/**
 * What a deploy costs the traffic (issue #32): a Worker that reads KV on every request, under a
 * steady 200 requests/s, changed five times. Once by `celld serve`'s deploy (through
 * DeployService, as wrangler's upload is: start check, hold, stop, start, release), once by
 * `celld dev --watch`'s restart for the same change (bundle, stop, start on the same port). For
 * each: the time from the deploy's start to the new version answering a request, and the requests
 * that failed under the load. Same machine, same run, serve first.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { bundleWorker, type WorkerBundle } from "../packages/runtime/src/bundle/bundle.ts";
import type { WorkerConfig } from "../packages/runtime/src/config/index.ts";
import { queuesOf } from "../packages/runtime/src/config/model.ts";
import type { HostLog } from "../packages/runtime/src/host/host-log.ts";
import { startHost, type Host } from "../packages/runtime/src/host/host.ts";
import type { SwapTimes } from "../packages/runtime/src/serve/serve-runtime.ts";
import { deploy, kvMetadata, kvWorker, startServeStack, steadyLoad, type LoadResult } from "../test/serve-harness.ts";

const changes = 5;
const perSecond = 200;
const graceMs = 10_000;
const host = "hello.localhost";

interface Run {
  /** Per change: ms from its start until a request was answered by the new version. */
  toNewVersionMs: number[];
  load: LoadResult;
}

/** Polls `url` every 10 ms until an answer starts with `v<n> `; resolves with the time it took. */
async function newVersionAnswers(url: URL, n: number, since: number): Promise<number> {
  for (;;) {
    try {
      const text = await (await fetch(url, { headers: { host } })).text();
      if (text.startsWith(`v${n} `)) return performance.now() - since;
    } catch {
      // the port is closed during a dev restart
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function serveRun(dataDir: string): Promise<{ run: Run; swaps: SwapTimes[]; versions: WorkerConfig[][] }> {
  const stack = await startServeStack(dataDir, undefined, graceMs);
  try {
    await deploy(stack, "hello", kvWorker(1), kvMetadata(true));
    await fetch(new URL("/put", stack.front.url), { headers: { host } });
    const versions: WorkerConfig[][] = [[...stack.runtime.workers]];
    const load = steadyLoad(stack.front.url, host, perSecond, () => "/");
    const toNewVersionMs: number[] = [];
    const swaps: SwapTimes[] = [];
    for (let n = 2; n <= changes + 1; n++) {
      const since = performance.now();
      const answered = newVersionAnswers(stack.front.url, n, since);
      await deploy(stack, "hello", kvWorker(n), kvMetadata(false));
      toNewVersionMs.push(await answered);
      swaps.push(stack.runtime.lastSwap!);
      versions.push([...stack.runtime.workers]);
    }
    return { run: { toNewVersionMs, load: await load.stop() }, swaps, versions };
  } finally {
    await stack.close();
  }
}

const quiet: HostLog = { info: () => undefined, warn: () => undefined, error: () => undefined, runtime: () => undefined };

function hostFor(dataDir: string, workers: WorkerConfig[], port: number, bundles?: ReadonlyMap<string, WorkerBundle>): Promise<Host> {
  return startHost({ deployment: { workers, queues: queuesOf(workers), warnings: [] }, dataDir, host: "127.0.0.1", port, log: quiet, ...(bundles === undefined ? {} : { bundles }) });
}

/** celld dev --watch's restart: bundled before anything stops, then close (grace) and start on the same port. */
async function devRun(dataDir: string, versions: WorkerConfig[][]): Promise<Run> {
  let running = await hostFor(dataDir, versions[0]!, 0);
  const port = Number(running.url.port);
  try {
    await fetch(new URL("/put", running.url), { headers: { host } });
    const load = steadyLoad(running.url, host, perSecond, () => "/");
    const toNewVersionMs: number[] = [];
    for (let n = 2; n <= changes + 1; n++) {
      const workers = versions[n - 1]!;
      const since = performance.now();
      const answered = newVersionAnswers(running.url, n, since);
      const bundles = new Map<string, WorkerBundle>();
      for (const worker of workers) bundles.set(worker.name, await bundleWorker(worker));
      await running.close(graceMs);
      running = await hostFor(dataDir, workers, port, bundles);
      toNewVersionMs.push(await answered);
    }
    return { toNewVersionMs, load: await load.stop() };
  } finally {
    await running.close();
  }
}

function failed(load: LoadResult): number {
  return load.sent - (load.statuses.get(200) ?? 0);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function p99Ms(load: LoadResult): number {
  const sorted = load.answers.map((a) => a.answeredAtMs - a.sentAtMs).sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length * 0.99)] ?? 0;
}

export async function runDeployBench(): Promise<void> {
  const dirs = [mkdtempSync(join(tmpdir(), "celld-bench-serve-")), mkdtempSync(join(tmpdir(), "celld-bench-dev-"))];
  try {
    console.log(`deploy: a Worker reading KV on every request, ${perSecond} requests/s, ${changes} changes`);
    const serve = await serveRun(dirs[0]!);
    const dev = await devRun(dirs[1]!, serve.versions);
    const row = (name: string, run: Run) =>
      `  ${name.padEnd(30)} to new version: median ${Math.round(median(run.toNewVersionMs))} ms (${run.toNewVersionMs.map(Math.round).join(", ")}); ` +
      `failed ${failed(run.load)} of ${run.load.sent}; p99 answer ${Math.round(p99Ms(run.load))} ms`;
    console.log(row("celld serve deploy (handoff)", serve.run));
    console.log(row("celld dev --watch restart", dev));
    const stage = (pick: (s: SwapTimes) => number) => Math.round(median(serve.swaps.map(pick)));
    console.log(
      `  serve's stages, median ms: check ${stage((s) => s.checkMs)} (old version serving), then requests held ${stage((s) => s.heldMs)}: ` +
        `in flight ${stage((s) => s.drainMs)}, stop ${stage((s) => s.stopMs)}, start ${stage((s) => s.startMs)}`,
    );
    console.log(`  serve / dev, time to new version: ${(median(serve.run.toNewVersionMs) / median(dev.toNewVersionMs)).toFixed(2)}x`);
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
