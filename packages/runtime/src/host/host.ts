import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { isCellError, systemClock, type QueueCells, type Clock } from "@celld/queue-cell";
import { ConsumerFailureLog, type BatchReport } from "@celld/bindings";
import type { Miniflare } from "miniflare";
import { setWorkerdV8Flags } from "../workerd/miniflare-v8-flags.ts";
import { defaultWorkerdV8Flags } from "../workerd/workerd-v8-flags-default.ts";
import { WorkerdGuard, workerdChildren, type ProcessInfo } from "../workerd/workerd-orphans.ts";
import { RuntimeSupervisor } from "../workerd/runtime-supervisor.ts";
import { RuntimeLines } from "../workerd/runtime-lines.ts";
import { RuntimeStartError, isRuntimeFailure } from "../workerd/runtime-start.ts";
import { StackPositions } from "../workerd/stack-positions.ts";
import type { HostPlugin, PluginStartContext } from "../plugins/host-plugin.ts";
import { QueuesPlugin } from "../plugins/queues-plugin.ts";
import { CronTriggersPlugin } from "../plugins/cron-triggers-plugin.ts";
import { TailPlugin } from "../plugins/tail-plugin.ts";
import { QueueErrorMarks } from "../worker-code/queue-error-record.ts";
import { ServiceWorkerConsole } from "../worker-code/service-worker-console.ts";
import { checkCellThreadsClock, openCellRegistry } from "./cell-registry-start.ts";
import { claimDataDir } from "./data-dir-claim.ts";
import { dataDirUnusable } from "./data-dir-lock.ts";
import { checkPortFree } from "./port-check.ts";
import { consoleHostLog, type HostLog } from "./host-log.ts";
import type { Host, HostOptions } from "./host-options.ts";
import { withoutMiniflareSignalListeners } from "./process-signals.ts";
import { buildWorkerSet, type WorkerFacts, type WorkerSet } from "./worker-set.ts";
import { giveWorkersSockets, startWorkersFront, workerUpstreams } from "./workers-front.ts";
import type { Front } from "../front/front-server.ts";
import { WorkerRouter } from "../front/worker-router.ts";

export type { Host, HostOptions } from "./host-options.ts";

/**
 * Starts a deployment: bundles each Worker, runs them all in one workerd through Miniflare with
 * their bindings, and starts the plugins' background work (queue consumers). The stages: claim
 * the data directory, open the cells, build the Workers, launch workerd, start the plugins.
 */
export async function startHost(options: HostOptions): Promise<Host> {
  const log = options.log ?? consoleHostLog;
  // Before anything starts: a route pattern the config check let through would fail here.
  const router = new WorkerRouter({ workers: options.deployment.workers, workersDevDomain: options.workersDevDomain });
  const listenHost = options.host ?? "127.0.0.1";
  const listenPort = options.port ?? 8787;
  const clock = options.clock ?? systemClock;
  if (options.registry === undefined) checkCellThreadsClock(options.cellThreads ?? 0, options.clock);
  if (options.registry !== undefined) {
    await checkPortFree(listenHost, listenPort);
    const basics = { log, clock, registry: options.registry, ownsRegistry: false, unlock: () => undefined, listenHost, listenPort, router };
    return new HostStart(options, basics).run();
  }
  const unlock = await claimDataDir(options.dataDir, listenHost, listenPort, log);
  let registry: QueueCells;
  try {
    registry = openCellRegistry(options, options.deployment, clock, log);
  } catch (error) {
    unlock();
    throw error;
  }
  return new HostStart(options, { log, clock, registry, ownsRegistry: true, unlock, listenHost, listenPort, router }).run();
}

interface HostBasics {
  log: HostLog;
  clock: Clock;
  registry: QueueCells;
  /** False when the caller lent the registry (options.registry): it stays open after close. */
  ownsRegistry: boolean;
  unlock: () => void;
  listenHost: string;
  listenPort: number;
  router: WorkerRouter;
}

/** One start of a host: the state its stages share, and the close of what it started. */
class HostStart {
  private readonly marks = new QueueErrorMarks();
  private readonly facts: WorkerFacts = { consumerKinds: new Map(), queueEntrypoints: new Map(), assetRouted: new Set(), errorTokens: new Map() };
  // A consumer failing every batch is told of once a window: its error from the handler shim
  // (through workerd's output) and its batches' fate from the dispatchers. Its reports are
  // printed as workerd's other lines are, once that path (lines) is set up.
  private readonly failures: ConsumerFailureLog;
  private readonly queues: QueuesPlugin;
  private readonly plugins: HostPlugin[];
  private lines: RuntimeLines | undefined;
  /** Owns Miniflare, and restarts workerd when it exits under the host. */
  private readonly runtime: RuntimeSupervisor;
  private guard: WorkerdGuard | undefined;
  private front: Front | undefined;
  /** workerd's children before a restart: the guard then watches the one the restart adds. */
  private workerdBeforeRestart: ProcessInfo[] = [];
  private closing: Promise<void> | undefined;

  constructor(
    private readonly options: HostOptions,
    private readonly basics: HostBasics,
  ) {
    const { log, clock, registry } = basics;
    this.failures = new ConsumerFailureLog(clock, { report: (text) => this.lines?.showReport(text), warn: (message) => log.warn(message) });
    this.queues = new QueuesPlugin({
      failures: this.failures,
      consumerKindOf: (worker) => this.facts.consumerKinds.get(worker) ?? "module",
      queueEntrypointOf: (worker) => this.facts.queueEntrypoints.get(worker),
      ...(options.addedConsumers === undefined ? {} : { added: options.addedConsumers }),
      cannotConsume: (worker) => (this.facts.assetRouted.has(worker) ? assetRoutedReason : undefined),
      allowQueueErrors: (worker, queue) => {
        const token = this.facts.errorTokens.get(worker);
        if (token !== undefined) this.marks.allow(token, queue);
      },
      deployment: options.deployment,
      registry,
      clock,
      log,
      wallTimeSeconds: options.consumerWallTimeSeconds,
      batchBytesInFlightMax: options.consumerBatchBytesInFlightMax,
      onBatch: batchReporter(options),
      onSendStages: options.onSendStages,
      dataDir: options.dataDir,
    });
    this.plugins = [this.queues, new CronTriggersPlugin({ deployment: options.deployment, clock, log })];
    if (options.tailSink !== undefined) this.plugins.push(new TailPlugin(options.tailSink));
    this.runtime = new RuntimeSupervisor({
      clock,
      log,
      hooks: {
        exited: () => {
          // Until workerd is back, the front answers 503 with Retry-After rather than try its sockets.
          this.front?.setUpstreams(new Map());
          options.metrics?.workerdExits.inc();
          for (const plugin of this.plugins) plugin.runtimeExited?.();
        },
        beforeRestart: () => {
          this.guard?.stop();
          this.workerdBeforeRestart = workerdChildren();
        },
        restarted: () => {
          void this.pointFrontAtRuntime();
          this.guard = WorkerdGuard.start(options.dataDir, this.workerdBeforeRestart);
          options.metrics?.workerdRestarts.inc();
          for (const plugin of this.plugins) plugin.runtimeRestarted?.();
        },
        gaveUp: (reason) => options.onRuntimeExit?.(reason),
      },
    });
  }

  async run(): Promise<Host> {
    try {
      for (const plugin of this.plugins) await plugin.prepare();
      const set = await buildWorkerSet({
        deployment: this.options.deployment,
        plugins: this.plugins,
        marks: this.marks,
        facts: this.facts,
        warn: (message) => this.basics.log.warn(message),
        bundles: this.options.bundles,
        inspector: this.options.inspectorPort !== undefined,
      });
      giveWorkersSockets(set.workers, this.viaEntry);
      for (const plugin of this.plugins) set.workers.push(...(await plugin.extraWorkers()));
      const mf = await this.launchRuntime(set);
      const front = await this.openFront(mf);
      const url = front.url;
      const inspectorUrl = this.options.inspectorPort === undefined ? undefined : await mf.getInspectorURL();
      await this.startPlugins(mf);
      return {
        url,
        front: { stats: front.stats, guard: front.guard, router: this.basics.router },
        registry: this.basics.registry,
        unopenedQueues: this.queues.unopenedQueues,
        miniflare: mf,
        runtime: this.runtime,
        sources: set.sources,
        inspectorUrl,
        consumerLoads: () => this.queues.consumerLoads(),
        close: (graceMs = 0) => (this.closing ??= this.close(graceMs)),
      };
    } catch (error) {
      await this.abandon();
      // A queue that cannot be opened or written at start (a disk that filled up): one line for
      // the operator, as for the directory itself.
      if (isCellError(error, "ERR_STORAGE")) throw dataDirUnusable(this.options.dataDir, `starting queue "${error.storage?.queue ?? "?"}"`, error);
      throw error;
    }
  }

  private get viaEntry(): boolean {
    return this.options.triggerHandlers === true;
  }

  /** The front door on the user's address (workers-front.ts), once workerd serves the Workers. */
  private async openFront(mf: Miniflare): Promise<Front> {
    const { options, basics } = this;
    this.front = await startWorkersFront({
      mf,
      deployment: options.deployment,
      router: basics.router,
      viaEntry: this.viaEntry,
      host: basics.listenHost,
      port: basics.listenPort,
      connectionsMax: options.connectionsMax,
      openFilesLimit: options.openFilesLimit,
      silentConnectionMs: options.silentConnectionMs,
      clock: basics.clock,
      log: basics.log,
      onAnswered: options.onFrontAnswered,
    });
    return this.front;
  }

  /** After a restart of workerd: where it serves each Worker now. */
  private async pointFrontAtRuntime(): Promise<void> {
    const upstreams = await workerUpstreams(this.runtime.miniflare, this.options.deployment, this.viaEntry).catch((error: unknown) => {
      this.basics.log.error("the restarted Workers' sockets could not be found; --port answers 503 until the next restart", error);
      return undefined;
    });
    if (upstreams !== undefined) this.front?.setUpstreams(upstreams);
  }

  /** workerd through Miniflare, its output read line by line; a refused start is a RuntimeStartError. */
  private async launchRuntime(set: WorkerSet): Promise<Miniflare> {
    const { options, basics } = this;
    // Stack positions name the user's sources, not the bundle; the shim's own frames are dropped.
    const serviceWorkerConsole = set.serviceWorkerScripts ? new ServiceWorkerConsole() : undefined;
    const lines = new RuntimeLines({
      log: basics.log,
      workers: options.deployment.workers,
      positions: new StackPositions(set.bundled),
      marks: this.marks,
      failures: this.failures,
      serviceWorkerConsole,
    });
    this.lines = lines;
    let stderrRead: Promise<void> = Promise.resolve();
    setWorkerdV8Flags(options.workerdV8Flags ?? defaultWorkerdV8Flags);
    const workerdBefore = workerdChildren();
    // start() makes its Miniflare before its first await, so the listeners are taken off at once.
    const start = (): Promise<Miniflare> => this.runtime.start({
      workers: set.workers,
      cf: false,
      host: "127.0.0.1",
      port: 0,
      ...(this.viaEntry ? { unsafeTriggerHandlers: true } : {}),
      defaultPersistRoot: join(options.dataDir, "miniflare"),
      // Loopback only, whatever --host says: the inspector runs any code in the Workers.
      ...(options.inspectorPort === undefined ? {} : { inspectorPort: options.inspectorPort, inspectorHost: "127.0.0.1" }),
      verbose: serviceWorkerConsole !== undefined,
      handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
        createInterface({ input: stdout }).on("line", (line) => lines.forward(line, "stdout"));
        const stderrLines = createInterface({ input: stderr }).on("line", (line) => lines.forward(line, "stderr"));
        stderrRead = new Promise((resolve) => stderrLines.once("close", resolve));
      },
    });
    const starting = options.callerHandlesStopSignals === true ? withoutMiniflareSignalListeners(start) : start();
    const mf = await starting.catch(async (error: unknown) => {
      if (!isRuntimeFailure(error)) throw error;
      // workerd has exited, but the lines that say why (and name the config key) may still be in
      // the pipe: read to its end, which takes well under a second.
      await Promise.race([stderrRead, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
      throw new RuntimeStartError(lines.startIssues);
    });
    lines.started();
    this.guard = WorkerdGuard.start(options.dataDir, workerdBefore);
    return mf;
  }

  private async startPlugins(mf: Miniflare): Promise<void> {
    const context: PluginStartContext = {
      directUrl: (name) => mf.unsafeGetDirectURL(name),
      // Through Miniflare's proxy to workerd: a few ms a run, which a run a minute at most can afford.
      runScheduled: async (name, event) => {
        const worker = await mf.getWorker(name);
        const result = await worker.scheduled({ cron: event.cron, scheduledTime: new Date(event.scheduledTime) });
        return { outcome: result.outcome };
      },
    };
    // The queues plugin starts its consumers last and all at once, and nothing after them waits
    // (the cron plugin arms timers): a caller's stop (celld dev's) is in place before a batch runs.
    for (const plugin of this.plugins) await plugin.start(context);
  }

  // Each step of a close runs once: a second would close servers already closed, and unlock a
  // data directory another host may have taken since. A close called again (a signal during a
  // shutdown, a caller's cleanup after its own close) gets the first's promise, so it settles
  // when, and as, the first does.
  private async close(graceMs: number): Promise<void> {
    this.runtime.stopSupervising();
    await this.front?.close();
    // Together: each plugin's in-flight work gets the same grace, not one grace after another's.
    await Promise.all(this.plugins.map((plugin) => plugin.stop(graceMs)));
    // Miniflare's dispose destroys workerd's pipes and kills it, so nothing more can come from
    // its output: what the failure log still counts is said now.
    await this.runtime.dispose();
    this.failures.flush();
    this.guard?.stop();
    for (const plugin of this.plugins) await plugin.dispose();
    if (this.basics.ownsRegistry) await this.basics.registry.closeAll();
    this.basics.unlock();
  }

  /** Undoes a start that failed part way, in the order close() uses. */
  private async abandon(): Promise<void> {
    await this.front?.close().catch(() => undefined);
    for (const plugin of this.plugins) await plugin.stop(0).catch(() => undefined);
    await this.runtime.dispose().catch(() => undefined);
    this.guard?.stop();
    for (const plugin of this.plugins) await plugin.dispose().catch(() => undefined);
    if (this.basics.ownsRegistry) await this.basics.registry.closeAll();
    this.basics.unlock();
  }
}

/** Why a Worker whose batches would go into its asset router runs no consumer added through the API. */
const assetRoutedReason =
  "its batches would go into its asset router, which drops them: a Worker with [assets] takes batches as an ES module " +
  "with a default export (a service-worker script takes them only when its config declares the consumer, without its assets)";

/** The consumers' batch reports, counted in the metrics (when kept) and told to options.onBatch. */
function batchReporter(options: HostOptions): ((report: BatchReport) => void) | undefined {
  const { metrics, onBatch } = options;
  if (metrics === undefined) return onBatch;
  return (report) => {
    metrics.batch({
      queue: report.queue,
      outcome: report.outcome,
      durationSeconds: report.durationMs / 1000,
      ackedAgesSeconds: report.ackedAgesMs.map((ms) => ms / 1000),
    });
    onBatch?.(report);
  };
}
