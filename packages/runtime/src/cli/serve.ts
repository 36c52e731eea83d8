import { systemClock, type QueueCells } from "@celld/queue-cell";
import { ApiKeyStore, startApiServer, type ApiServer } from "../api/index.ts";
import { R2BucketList } from "../deploy/r2-bucket-list.ts";
import { servedWorkersQueues } from "../serve/serve-workers-queues.ts";
import { TailSessions } from "../cloudflare-api/tail-sessions.ts";
import { DeployService } from "../deploy/deploy-service.ts";
import { DeployStore } from "../deploy/deploy-store.ts";
import { descriptorBudget, frontUpstreamSocketsMax } from "../front/descriptor-budget.ts";
import { startFront, type Front } from "../front/front-server.ts";
import { requestHoldDefaults } from "../front/request-hold.ts";
import { openCellRegistry } from "../host/cell-registry-start.ts";
import { claimDataDir } from "../host/data-dir-claim.ts";
import { consoleHostLog } from "../host/host-log.ts";
import { readOpenFilesLimit } from "../host/open-files-limit.ts";
import { ServeRuntime } from "../serve/serve-runtime.ts";
import { CelldMetrics } from "../metrics/celld-metrics.ts";
import { MetricsEndpoint } from "../metrics/metrics-endpoint.ts";
import { AddedConsumers } from "../plugins/added-consumers.ts";
import { readAddedConsumers } from "../cloudflare-api/queues/added-consumers-of.ts";
import { exitStatus } from "./exit-status.ts";
import type { ServeArgs } from "./serve-args.ts";

/** How long in-flight batches may run, at a deploy or a stop, before they are handed back. */
const graceMs = 10_000;
const cellIdleCloseMs = 5 * 60_000;
const stopSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/**
 * `celld serve`: a long-lived host with no config. It runs what was last deployed to its data
 * directory and takes deploys on the API port (/client/v4, as wrangler calls Cloudflare). The
 * process holds the data directory, the cells, the API and `--port` for its whole life; a deploy
 * replaces only the Workers (serve/serve-runtime.ts).
 */
export async function serve(args: ServeArgs): Promise<number> {
  const log = consoleHostLog;
  const unlock = await claimDataDir(args.dataDir, args.host, args.port, log);
  const none = { workers: [], queues: [], warnings: [] };
  // Counted from serve's start, across every deploy (each start of the Workers reports to it).
  const metrics = new CelldMetrics({ workerEnv: args.workersEnv });
  let registry: QueueCells;
  try {
    registry = openCellRegistry({ deployment: none, dataDir: args.dataDir, cellIdleCloseMs, cellThreads: args.cellThreads, metrics }, none, systemClock, log);
  } catch (error) {
    unlock();
    throw error;
  }
  const session = new ServeSession(args, registry, unlock, metrics);
  try {
    await session.start();
  } catch (error) {
    await session.close();
    throw error;
  }
  return untilStopped(() => session.close());
}

/** What `celld serve` holds for its life, started in order and closed in the reverse. */
class ServeSession {
  private readonly log = consoleHostLog;
  private keys: ApiKeyStore | undefined;
  private front: Front | undefined;
  private api: ApiServer | undefined;
  private runtime: ServeRuntime | undefined;
  // `wrangler tail` sessions: the Workers' trace events go to their sockets on the API port.
  private readonly tails = new TailSessions((line) => this.log.info(line));

  constructor(
    private readonly args: ServeArgs,
    private readonly registry: QueueCells,
    private readonly unlock: () => void,
    private readonly metrics: CelldMetrics,
  ) {}

  async start(): Promise<void> {
    const { args, log } = this;
    const keys = ApiKeyStore.open(args.dataDir);
    this.keys = keys;
    const budget = descriptorBudget({ openFilesLimit: readOpenFilesLimit(), workers: 1, api: true });
    const front = await this.startFront(budget.workersConnectionsMax);
    // The consumers added through the API (wrangler queues consumer add, deploy's consumers): each
    // start of the Workers runs them, and the API tells every change.
    const addedConsumers = new AddedConsumers(readAddedConsumers(args.dataDir, args.workersEnv));
    const running = new ServeRuntime({
      dataDir: args.dataDir,
      registry: this.registry,
      front,
      log,
      graceMs,
      cellIdleCloseMs,
      workersDevDomain: args.workersDevDomain,
      tailSink: (events) => this.tails.publish(events),
      afterRun: () => takeSignals(),
      addedConsumers,
      metrics: this.metrics,
    });
    this.runtime = running;
    const store = new DeployStore(args.dataDir);
    const workers = new DeployService(store, running);
    await workers.start();
    const api = await this.startApi(keys, workers, running, addedConsumers, budget.apiConnectionsMax);
    const deployed = store.scripts();
    log.info(`celld serve: data in ${args.dataDir}; ${deployed.length === 0 ? "nothing deployed yet" : `running ${deployed.join(", ")}`}`);
    log.info(`deploys take tokens of ${args.workersEnv} (account ${args.workersEnv.split("/")[1]}); its queues are the Workers' queues`);
    log.info(`Workers on ${front.url.href.replace(/\/$/, "")}; API on ${api.url} (wrangler: CLOUDFLARE_API_BASE_URL=${api.url}/client/v4)`);
  }

  private async startFront(connectionsMax: number): Promise<Front> {
    this.front = await startFront({
      host: this.args.host,
      port: this.args.port,
      // Requests past the pool wait in the front, unrouted, so that a swap waits only for those
      // the old Workers have (front/request-hold.ts).
      hold: { ...requestHoldDefaults, forwardingMax: frontUpstreamSocketsMax },
      router: undefined,
      upstreams: new Map(),
      connectionsMax,
      warn: (line) => this.log.warn(line),
    });
    const front = this.front;
    this.metrics.connections.watch("workers", () => front.stats.connections);
    return front;
  }

  private async startApi(keys: ApiKeyStore, workers: DeployService, running: ServeRuntime, addedConsumers: AddedConsumers, connectionsMax: number): Promise<ApiServer> {
    const { args, log } = this;
    const r2Buckets = new R2BucketList(args.dataDir, () => running.workers.flatMap((w) => w.r2Buckets.map((b) => b.bucketName)));
    this.api = await startApiServer({
      registry: this.registry,
      keys,
      dataDir: args.dataDir,
      port: args.apiPort,
      host: args.apiHost,
      connectionsMax,
      addedConsumers,
      // The deployed Workers' queues are the Workers environment's, as `celld dev`'s are.
      workerQueues: { env: args.workersEnv },
      onUpgrade: (req, socket, head) => this.tails.upgrade(req, socket, head),
      cloudflareServices: {
        tails: this.tails,
        workers,
        workersEnv: args.workersEnv,
        workersQueues: servedWorkersQueues(() => running.workers),
        r2Buckets,
      },
      onInternalError: (error) => log.error("the API failed a request", error),
      onStorageFailure: (line) => log.error(`the API refused calls: ${line}`),
      // A key with metrics:read: the host's series and its environment's queues (docs/operating.md).
      metrics: new MetricsEndpoint({ metrics: this.metrics, registry: this.registry, consumers: () => running.consumerLoads() }),
    });
    const api = this.api;
    this.metrics.connections.watch("api", () => api.connections);
    return this.api;
  }

  async close(): Promise<void> {
    const { log } = this;
    // An upgraded socket keeps the API's server from closing: the tails end first.
    this.tails.closeAll();
    await this.api?.close().catch((error: unknown) => log.error("the API did not close cleanly", error));
    await this.runtime?.stop().catch((error: unknown) => log.error("the Workers did not stop cleanly", error));
    await this.front?.close();
    await this.registry.closeAll();
    this.keys?.close();
    this.unlock();
  }
}

/** Resolves with the exit status once a stop signal has closed everything; a second signal exits at once. */
function untilStopped(closeAll: () => Promise<void>): Promise<number> {
  const log = consoleHostLog;
  return new Promise<number>((resolve) => {
    const stop = (signal: string): void => {
      if (stopping) process.exit(128 + 2);
      stopping = true;
      log.info(`${signal}: stopping (in-flight batches get ${graceMs / 1000} s to finish)...`);
      closeAll().then(
        () => {
          log.info("stopped");
          resolve(exitStatus.ok);
        },
        (error: unknown) => {
          log.error("shutdown failed", error);
          resolve(exitStatus.failed);
        },
      );
    };
    for (const signal of stopSignals) listeners.set(signal, () => stop(signal));
    takeSignals();
  });
}

const listeners = new Map<(typeof stopSignals)[number], () => void>();
let stopping = false;

/** Miniflare adds an exit-at-once listener with each workerd it starts (each deploy): ours stay the only ones. */
function takeSignals(): void {
  for (const [signal, ours] of listeners) {
    if (!process.listeners(signal).includes(ours)) process.on(signal, ours);
    for (const listener of process.listeners(signal)) if (listener !== ours) process.removeListener(signal, listener);
  }
}
