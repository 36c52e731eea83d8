import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { onTestFinished } from "vitest";
import { CellRegistry, ManualClock, ThreadedCellRegistry, type Clock, type QueueCells } from "@celld/queue-cell";
import { ApiKeyStore, defaultWorkerEnv, startApiServer, type ApiScope } from "../src/api/index.ts";
import { CelldMetrics } from "../src/metrics/celld-metrics.ts";
import { MetricsEndpoint } from "../src/metrics/metrics-endpoint.ts";

/** Debian's prometheus package puts it here; .ci/run installs it. */
export const promtoolPath = process.env["CELLD_PROMTOOL"] ?? "/usr/bin/promtool";

/**
 * A real API server serving /metrics over a registry whose cells report to CelldMetrics, on a
 * fresh data directory with durable commits (so fsyncs are timed) and a ManualClock. With
 * `cellThreads`, the cells run on that many worker threads (pass the system clock then).
 */
export async function metricsHarness(options: { public?: boolean; clock?: Clock; cellThreads?: number } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), "celld-metrics-"));
  const clock = options.clock ?? new ManualClock();
  const metrics = new CelldMetrics({ workerEnv: defaultWorkerEnv });
  const registry: QueueCells =
    options.cellThreads === undefined
      ? new CellRegistry({ dataDir, clock, durability: "full", observe: metrics.observerFor, syncFile: metrics.syncFile })
      : new ThreadedCellRegistry({ dataDir, threads: options.cellThreads, durability: "full", observe: metrics.observerFor, onFileSynced: metrics.fileSynced });
  const keys = ApiKeyStore.open(dataDir, { clock });
  const endpoint = new MetricsEndpoint({ metrics, registry, clock, ...(options.public === undefined ? {} : { public: options.public }) });
  const server = await startApiServer({ registry, keys, dataDir, clock, port: 0, metrics: endpoint });
  metrics.connections.watch("api", () => server.connections);
  onTestFinished(async () => {
    await server.close();
    await registry.closeAll();
    keys.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const key = (env: string, scopes: ApiScope[]): string => keys.create({ env, scopes }).key;
  async function call(method: string, path: string, opts: { key?: string; body?: unknown; accept?: string } = {}) {
    const headers: Record<string, string> = {};
    if (opts.key !== undefined) headers["authorization"] = `Bearer ${opts.key}`;
    if (opts.accept !== undefined) headers["accept"] = opts.accept;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    const res = await request(`${server.url}${path}`, {
      method: method as "GET",
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    });
    const text = await res.body.text();
    return { status: res.statusCode, type: String(res.headers["content-type"] ?? ""), text };
  }
  return { dataDir, clock: clock as ManualClock, metrics, registry, keys, server, key, call };
}

/** The value of one series in Prometheus text, or undefined when it is not there. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)/.exec(line);
    if (match === null || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const pair of (match[3] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) found[pair[1]!] = pair[2]!;
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[4]);
  }
  return undefined;
}

/** `promtool check metrics` on `text`: its exit status and what it printed. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const run = spawnSync(promtoolPath, ["check", "metrics"], { input: text, encoding: "utf8" });
  if (run.error !== undefined) throw run.error;
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}
