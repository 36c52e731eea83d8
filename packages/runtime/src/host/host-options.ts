import type { Clock, Durability, QueueCells } from "@celld/queue-cell";
import type { BatchReport, SendStages } from "@celld/bindings";
import type { RuntimeSupervisor } from "../workerd/runtime-supervisor.ts";
import type { Miniflare } from "miniflare";
import type { WorkerBundle } from "../bundle/bundle.ts";
import type { Deployment } from "../config/index.ts";
import type { CelldMetrics } from "../metrics/celld-metrics.ts";
import type { ConsumerLoad } from "../metrics/queue-gauges.ts";
import type { HostLog } from "./host-log.ts";
import type { AddedConsumers } from "../plugins/added-consumers.ts";
import type { Front, FrontRequest } from "../front/front-server.ts";
import type { WorkerRouter } from "../front/worker-router.ts";

export interface HostOptions {
  deployment: Deployment;
  /** Cells, KV, D1, R2 and Durable Object storage live here and survive restarts. */
  dataDir: string;
  /**
   * The cells' registry of a process that keeps it across starts of its Workers (`celld serve`,
   * which holds the data directory's lock itself): the host neither locks the directory nor
   * opens or closes the cells, so the API that serves the same cells never sees them closed.
   */
  registry?: QueueCells;
  /** The Workers' HTTP port (the front door: docs/routing.md); 0 picks a free one. */
  port?: number;
  /** `<worker>.<domain>` reaches that Worker, as `<worker>.localhost` does. */
  workersDevDomain?: string;
  /**
   * Client connections open at once on `port`; unset, what the descriptor budget leaves for them
   * (front/descriptor-budget.ts, sized as if the API listened too).
   */
  connectionsMax?: number;
  /** A connection to `port` that sends no byte this long is closed (10 s unless a test sets less). */
  silentConnectionMs?: number;
  /** Told of each request the front answered, with its Worker (`celld dev --log-requests`). */
  onFrontAnswered?: (request: FrontRequest) => void;
  host?: string;
  clock?: Clock;
  log?: HostLog;
  durability?: Durability;
  /**
   * Worker threads the cells run on (a ThreadedCellRegistry: each queue owned by one thread), so
   * that many busy queues use more than one core; 0 or unset: every cell on the main thread. Needs
   * the system clock (a fake clock cannot cross threads); ignored with `registry`, whose maker chose.
   */
  cellThreads?: number;
  /** Close a queue's cell after it has been idle this long (it reopens on use). Unset: never. */
  cellIdleCloseMs?: number;
  /** Consumer wall-time limit in seconds (15 minutes unless a test sets less). */
  consumerWallTimeSeconds?: number;
  /** Body bytes all consumers' unsettled batches may hold (limits.consumerBatchBytesInFlightMax). */
  consumerBatchBytesInFlightMax?: number;
  /**
   * The process's open-files limit, which bounds the cells kept open (see openCellsMaxFor). Read
   * from /proc/self/limits on Linux unless set; elsewhere unknown, and limits.openCellsMax holds.
   */
  openFilesLimit?: number;
  /**
   * Told once if workerd exits too often to be started again (RuntimeSupervisor: the fifth exit
   * within a minute), with the line the host has logged; not when close() stops it. Nothing runs
   * a Worker after that. `celld dev` stops. An exit before that is restarted, and not told here.
   */
  onRuntimeExit?: (reason: string) => void;
  onBatch?: (report: BatchReport) => void;
  /** Told where each Worker send's time went in this process (`npm run bench host`); unset, nothing is timed. */
  onSendStages?: (stages: SendStages) => void;
  /**
   * The consumers added through the API, kept by the process across starts of its Workers: the
   * host runs their Worker consumers while it runs, and its queues' cells keep their policies.
   */
  addedConsumers?: AddedConsumers;
  /**
   * Told each batch of the Workers' trace events (workerd's tail Workers: plugins/tail-plugin.ts),
   * for `wrangler tail` under `celld serve`. Unset: the Workers have no tail Worker.
   */
  tailSink?: (events: unknown[]) => void;
  /**
   * Serve the first Worker through Miniflare's entry Worker with its trigger routes on
   * (`/cdn-cgi/handler/scheduled`), as wrangler dev does, instead of on a socket of its own. Each
   * request then costs workerd more CPU (see below), so only `celld dev --test-scheduled` asks.
   */
  triggerHandlers?: boolean;
  /**
   * Workers' plain bundles (bundleWorker with no options) already built, by Worker name: `celld
   * dev --watch` builds them to check a change before it stops the running Workers, and the start
   * does not build them again.
   */
  bundles?: ReadonlyMap<string, WorkerBundle>;
  /**
   * Serve the Workers' inspector (Chrome DevTools protocol) on 127.0.0.1 at this port, 0 for a free
   * one; `Host.inspectorUrl` says where. Only the deployment's Workers are targets, not celld's own.
   */
  inspectorPort?: number;
  /**
   * V8 flags for workerd (defaultWorkerdV8Flags unless set; [] for workerd's own defaults).
   * Process-wide: see miniflare-v8-flags.ts.
   */
  workerdV8Flags?: readonly string[];
  /** Where the cells, the consumers' batches and workerd's exits are counted (`GET /metrics`). */
  metrics?: CelldMetrics;
  /**
   * The caller stops the host on SIGINT and SIGTERM (`celld dev`), and listens to them before the
   * host starts: Miniflare's own listeners, which would exit the process at once, are taken off as
   * soon as it is made (see withoutMiniflareSignalListeners).
   */
  callerHandlesStopSignals?: boolean;
}

export interface Host {
  /** The Workers' port: the first Worker answers any host no other Worker claims (docs/routing.md). */
  readonly url: URL;
  /** The front door on `url`: its router (for the banner) and counters (for /metrics). */
  readonly front: Pick<Front, "stats" | "guard"> & { readonly router: WorkerRouter };
  readonly registry: QueueCells;
  /** The deployment's queues whose own file could not be opened at start (each told in an error line). */
  readonly unopenedQueues: readonly string[];
  readonly miniflare: Miniflare;
  /** Owns workerd's lifecycle: restarts it when it exits, counts that (`stats`), applies new options. */
  readonly runtime: RuntimeSupervisor;
  /** The files the Workers were bundled from (`celld dev --watch` restarts when one changes). */
  readonly sources: readonly string[];
  /** Where the inspector answers (`ws://127.0.0.1:PORT`), with `inspectorPort`; else undefined. */
  readonly inspectorUrl: URL | undefined;
  /** Each consumer's batches running now and its max_concurrency. */
  consumerLoads(): ConsumerLoad[];
  /**
   * Stops consumers (in-flight batches get `graceMs`), workerd and the cells. Called again, it
   * returns the first call's promise (the first call's `graceMs` holds).
   */
  close(graceMs?: number): Promise<void>;
}

