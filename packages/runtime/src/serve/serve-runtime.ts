import { performance } from "node:perf_hooks";
import type { QueueCells } from "@celld/queue-cell";
import type { WorkerBundle } from "../bundle/bundle.ts";
import type { WorkerConfig } from "../config/index.ts";
import { queuesOf } from "../config/model.ts";
import { DeployError } from "../deploy/deploy-errors.ts";
import type { WorkersRuntime } from "../deploy/deploy-service.ts";
import { checkWorkersStart } from "../deploy/start-check.ts";
import type { Front } from "../front/front-server.ts";
import { WorkerRouter } from "../front/worker-router.ts";
import type { HostLog } from "../host/host-log.ts";
import { startHost, type Host } from "../host/host.ts";
import type { AddedConsumers } from "../plugins/added-consumers.ts";
import type { CelldMetrics } from "../metrics/celld-metrics.ts";
import type { ConsumerLoad } from "../metrics/queue-gauges.ts";

export interface ServeRuntimeOptions {
  dataDir: string;
  /** Held by `celld serve` for its whole life, across every start of the Workers. */
  registry: QueueCells;
  /** `--port`, which outlives every start of the Workers; it holds requests while they are swapped. */
  front: Pick<Front, "setRouter" | "setUpstreams" | "holdRequests" | "releaseRequests" | "requestsDone">;
  log: HostLog;
  /** How long in-flight batches of the Workers being replaced may run before they are handed back. */
  graceMs: number;
  cellIdleCloseMs?: number;
  /** Told the Workers' trace events, for `wrangler tail` (HostOptions.tailSink). */
  tailSink?: (events: unknown[]) => void;
  /** `--workers-dev-domain`: `<worker>.<domain>` reaches a Worker whose workers.dev is on. */
  workersDevDomain?: string;
  /** Told after each run, whatever its outcome (each start of workerd adds Miniflare's signal listeners). */
  afterRun?: () => void;
  /** The consumers added through the API, which each start of the Workers runs. */
  addedConsumers?: AddedConsumers;
  /** Where every start of the Workers counts its batches and workerd's exits (`GET /metrics`). */
  metrics?: CelldMetrics;
}

/** How long each stage of the last swap took, in ms (the bench and the log line print them). */
export interface SwapTimes {
  /** The new Workers built and started once, with no storage, while the old ones serve on. */
  checkMs: number;
  /** New requests held at the front while those in flight finish on the old Workers. */
  drainMs: number;
  /** The old workerd stopped: batches in flight finish (within the grace), storage closed. */
  stopMs: number;
  /** The new workerd started on the same storage, consumers and cron started. */
  startMs: number;
  /** drain + stop + start: how long a request arriving as the swap began waited. */
  heldMs: number;
  /** Queue batches running on the old Workers when they were told to stop: each finished there. */
  batchesAtStop: number;
}

/**
 * The Workers `celld serve` runs, replaced whole at each deploy. The front door on `--port` and
 * the cells stay; what changes is workerd and the Workers in it. A swap (docs/design-notes.md,
 * "The swap without a gap"):
 *
 * 1. check: the new Workers are built and started once in a workerd of their own with no storage
 *    (start-check.ts), beside the running ones; one that cannot start is refused and nothing
 *    else happens;
 * 2. hold: the front holds new requests; those in flight finish on the old Workers;
 * 3. stop: the old workerd stops: its queue batches finish (within the grace, then go back to
 *    their cells), and its KV, D1, R2 and Durable Object files are closed;
 * 4. start: the new workerd opens the same storage, and the held requests go to it.
 *
 * Two workerd processes never have the storage open at once: a test showed that both would
 * open its SQLite files, and that a Durable Object would then run twice
 * (test/shared-persist-dir.test.ts). Requests wait during 2-4 rather than fail.
 */
export class ServeRuntime implements WorkersRuntime {
  private host: Host | undefined;
  private running: WorkerConfig[] = [];
  /** The stages of the last swap; undefined before the first. */
  lastSwap: SwapTimes | undefined;

  constructor(private readonly options: ServeRuntimeOptions) {}

  get workers(): readonly WorkerConfig[] {
    return this.running;
  }

  /** The running Workers' consumers: batches running now and max_concurrency (none between starts). */
  consumerLoads(): ConsumerLoad[] {
    return this.host?.consumerLoads() ?? [];
  }

  async run(workers: WorkerConfig[]): Promise<void> {
    try {
      await this.replace(workers);
    } finally {
      this.options.afterRun?.();
    }
  }

  async check(workers: WorkerConfig[]): Promise<void> {
    try {
      await checkWorkersStart(workers);
    } finally {
      this.options.afterRun?.();
    }
  }

  private async replace(workers: WorkerConfig[]): Promise<void> {
    const began = performance.now();
    const bundles = workers.length > 0 ? await checkWorkersStart(workers) : undefined;
    const checked = performance.now();
    const { front, log } = this.options;
    front.holdRequests();
    try {
      // Requests forwarded before the hold finish on the old Workers; one that streams for longer
      // than this is cut when its workerd stops.
      await Promise.race([front.requestsDone(), delay(inFlightRequestsMsMax)]);
      const drained = performance.now();
      const previous = this.running;
      const batchesAtStop = this.host?.consumerLoads().reduce((n, load) => n + load.inUse, 0) ?? 0;
      await this.stop();
      const stopped = performance.now();
      await this.startOrFallBack(workers, previous, bundles);
      const started = performance.now();
      this.lastSwap = { checkMs: checked - began, drainMs: drained - checked, stopMs: stopped - drained, startMs: started - stopped, heldMs: started - checked, batchesAtStop };
      const stages = `in flight ${Math.round(drained - checked)}, stop ${Math.round(stopped - drained)}, start ${Math.round(started - stopped)}`;
      if (previous.length > 0) {
        log.info(`celld serve: Workers swapped; start check ${Math.round(checked - began)} ms (old version serving); requests waited ${Math.round(started - checked)} ms (${stages}); ${batchesAtStop} queue batch(es) running at the stop were let finish`);
      }
    } finally {
      front.releaseRequests();
    }
  }

  /** Starts `workers`; if they cannot start, starts `previous` again and throws. */
  private async startOrFallBack(workers: WorkerConfig[], previous: WorkerConfig[], bundles: ReadonlyMap<string, WorkerBundle> | undefined): Promise<void> {
    try {
      await this.start(workers, bundles);
    } catch (error) {
      this.options.log.error(`the deployed Workers could not start (${(error as Error).message}); starting those that ran before`);
      await this.start(previous).catch((again: unknown) => {
        this.options.log.error("the Workers that ran before could not start again either: no Worker runs until the next deploy", again);
      });
      throw new DeployError("invalid_upload", `the Worker could not start: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Stops the Workers; the front answers 503 until the next run. */
  async stop(): Promise<void> {
    this.options.front.setUpstreams(new Map());
    const host = this.host;
    this.host = undefined;
    this.running = [];
    await host?.close(this.options.graceMs);
  }

  private async start(workers: WorkerConfig[], bundles?: ReadonlyMap<string, WorkerBundle>): Promise<void> {
    const { front } = this.options;
    if (workers.length === 0) {
      front.setRouter(undefined);
      return;
    }
    const host = await startHost({
      deployment: { workers, queues: queuesOf(workers), warnings: [] },
      dataDir: this.options.dataDir,
      registry: this.options.registry,
      host: "127.0.0.1",
      port: 0,
      log: this.options.log,
      cellIdleCloseMs: this.options.cellIdleCloseMs,
      ...(bundles === undefined ? {} : { bundles }),
      addedConsumers: this.options.addedConsumers,
      workersDevDomain: this.options.workersDevDomain,
      tailSink: this.options.tailSink,
      metrics: this.options.metrics,
    });
    this.host = host;
    this.running = workers;
    front.setRouter(new WorkerRouter({ workers, workersDevDomain: this.options.workersDevDomain }));
    // Every Worker goes to the host's own front on loopback, which routes by the same rules to
    // each Worker's socket and follows workerd's restarts (host/workers-front.ts).
    const inner = { host: host.url.hostname, port: Number(host.url.port) };
    front.setUpstreams(new Map(workers.map((w) => [w.name, inner])));
  }
}

/** How long a swap waits for requests in flight on the old Workers (a streamed answer may be long). */
const inFlightRequestsMsMax = 30_000;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
