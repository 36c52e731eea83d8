/**
 * What a deploy costs the traffic (issue #32): a Worker that reads KV on every request, under a
 * steady 200 requests/s, changed five times. Once by the real `wrangler deploy` against a real
 * `celld serve` process (timed from wrangler's start; serve's log gives its swap's stages), once
 * by `celld dev --watch`'s restart for the same change (config read and bundled, stop, start on
 * the same port). For each: the time from the change's start to the new version answering a
 * request, and the requests that failed under the load. Same machine, same run, serve first.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { bundleWorker, type WorkerBundle } from "../packages/runtime/src/bundle/bundle.ts";
import { loadDeployment, type WorkerConfig } from "../packages/runtime/src/config/index.ts";
import { queuesOf } from "../packages/runtime/src/config/model.ts";
import type { HostLog } from "../packages/runtime/src/host/host-log.ts";
import { startHost, type Host } from "../packages/runtime/src/host/host.ts";
import { steadyLoad, type LoadResult } from "../test/serve-harness.ts";
import { benchHost, newVersionAnswers, writeKvProject } from "./deploy-project.ts";
import { wranglerServeRun, type LoggedSwap } from "./deploy-serve-wrangler.ts";

const changes = 5;
const perSecond = 200;
const graceMs = 10_000;

interface Run {
  /** Per change: ms from its start until a request was answered by the new version. */
  toNewVersionMs: number[];
  load: LoadResult;
}

const quiet: HostLog = { info: () => undefined, warn: () => undefined, error: () => undefined, runtime: () => undefined };

function hostFor(dataDir: string, workers: WorkerConfig[], port: number, bundles?: ReadonlyMap<string, WorkerBundle>): Promise<Host> {
  return startHost({ deployment: { workers, queues: queuesOf(workers), warnings: [] }, dataDir, host: "127.0.0.1", port, log: quiet, ...(bundles === undefined ? {} : { bundles }) });
}

/** Version `n` of the project, read from its wrangler.toml as celld dev reads it. */
function workersOf(projectDir: string, n: number): WorkerConfig[] {
  writeKvProject(projectDir, n);
  return loadDeployment([join(projectDir, "wrangler.toml")]).workers;
}

/** celld dev --watch's restart: read and bundled before anything stops, then close (grace) and start on the same port. */
async function devRun(dataDir: string, projectDir: string): Promise<Run> {
  let running = await hostFor(dataDir, workersOf(projectDir, 1), 0);
  const port = Number(running.url.port);
  try {
    await fetch(new URL("/put", running.url), { headers: { host: benchHost } });
    const load = steadyLoad(running.url, benchHost, perSecond, () => "/");
    const toNewVersionMs: number[] = [];
    for (let n = 2; n <= changes + 1; n++) {
      const since = performance.now();
      const answered = newVersionAnswers(running.url, n, since);
      const workers = workersOf(projectDir, n);
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
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function p99Ms(load: LoadResult): number {
  const sorted = load.answers.map((a) => a.answeredAtMs - a.sentAtMs).sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length * 0.99)] ?? 0;
}

function row(name: string, run: Run): string {
  return (
    `  ${name.padEnd(32)} to new version: median ${Math.round(median(run.toNewVersionMs))} ms (${run.toNewVersionMs.map(Math.round).join(", ")}); ` +
    `failed ${failed(run.load)} of ${run.load.sent}; p99 answer ${Math.round(p99Ms(run.load))} ms`
  );
}

function stagesLine(swaps: LoggedSwap[]): string {
  const stage = (pick: (s: LoggedSwap) => number) => Math.round(median(swaps.map(pick)));
  return (
    `  serve's stages (its log, ${swaps.length} swaps), median ms: start check ${stage((s) => s.checkMs)} (old version serving), ` +
    `then requests held ${stage((s) => s.heldMs)}: in flight ${stage((s) => s.drainMs)}, stop ${stage((s) => s.stopMs)}, start ${stage((s) => s.startMs)}`
  );
}

export async function runDeployBench(): Promise<void> {
  const dirs = [mkdtempSync(join(tmpdir(), "celld-bench-dev-")), mkdtempSync(join(tmpdir(), "celld-bench-dev-project-"))];
  try {
    console.log(`deploy: a Worker reading KV on every request, ${perSecond} requests/s, ${changes} changes`);
    const serve = await wranglerServeRun(changes, perSecond);
    const dev = await devRun(dirs[0]!, dirs[1]!);
    console.log(row("wrangler deploy to celld serve", serve));
    console.log(`  ${"".padEnd(32)} wrangler's run (start to exit): median ${Math.round(median(serve.wranglerMs))} ms (${serve.wranglerMs.map(Math.round).join(", ")})`);
    console.log(stagesLine(serve.swaps));
    console.log(row("celld dev --watch restart", dev));
    console.log(`  serve / dev, time to new version: ${(median(serve.toNewVersionMs) / median(dev.toNewVersionMs)).toFixed(2)}x`);
  } finally {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
