import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { CellRegistry, isCellError, limits, systemClock, type Clock, type Durability } from "@celld/queue-cell";
import { ConsumerFailureLog, type BatchReport, type ConsumerKind } from "@celld/bindings";
import { Miniflare, type WorkerOptions } from "miniflare";
import { bundleWorker, type WorkerBundle } from "../bundle/bundle.ts";
import type { Deployment, WorkerConfig } from "../config/index.ts";
import { setWorkerdV8Flags } from "../workerd/miniflare-v8-flags.ts";
import { defaultWorkerdV8Flags } from "../workerd/workerd-v8-flags-default.ts";
import { dataDirAccessWarning } from "./data-dir-access.ts";
import { dataDirUnusable, lockDataDir } from "./data-dir-lock.ts";
import { WorkerdGuard, stopLeftoverWorkerd, workerdChildren } from "../workerd/workerd-orphans.ts";
import { consoleHostLog, logCellBackgroundError, type HostLog } from "./host-log.ts";
import type { HostPlugin, PluginStartContext } from "../plugins/host-plugin.ts";
import { handlerErrorShim, handlerUses, queueEntrypointName, noDefaultExportWarning, noListenerWarning } from "../worker-code/handler-error-shim.ts";
import { addsListener } from "../worker-code/service-worker-listeners.ts";
import { withServiceWorkerShim } from "../worker-code/service-worker-shim.ts";
import { consumedPastOpenCellsMessage, openCellsLoweredMessage, openCellsMaxFor, readOpenFilesLimit } from "./open-files-limit.ts";
import { checkPortFree } from "./port-check.ts";
import { QueueErrorMarks } from "../worker-code/queue-error-record.ts";
import { QueuesPlugin } from "../plugins/queues-plugin.ts";
import { CronTriggersPlugin } from "../plugins/cron-triggers-plugin.ts";
import { RuntimeOutputFilter } from "../workerd/runtime-output.ts";
import { ServiceWorkerConsole } from "../worker-code/service-worker-console.ts";
import { RuntimeStartError, StartBlame, isRuntimeFailure } from "../workerd/runtime-start.ts";
import { StackPositions, type BundledWorker } from "../workerd/stack-positions.ts";
import { workerOptions } from "./worker-options.ts";

export interface HostOptions {
  deployment: Deployment;
  /** Cells, KV, D1, R2 and Durable Object storage live here and survive restarts. */
  dataDir: string;
  /** HTTP port of the first Worker; 0 picks a free one. */
  port?: number;
  host?: string;
  clock?: Clock;
  log?: HostLog;
  durability?: Durability;
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
   * Told once if workerd exits while the host runs (not when close() stops it). Nothing runs a
   * Worker after that; the host has logged it. `celld dev` stops.
   */
  onRuntimeExit?: () => void;
  onBatch?: (report: BatchReport) => void;
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
}

export interface Host {
  /** Where the first Worker answers HTTP. */
  readonly url: URL;
  readonly registry: CellRegistry;
  /** The deployment's queues whose own file could not be opened at start (each told in an error line). */
  readonly unopenedQueues: readonly string[];
  readonly miniflare: Miniflare;
  /** The files the Workers were bundled from (`celld dev --watch` restarts when one changes). */
  readonly sources: readonly string[];
  /** Where the inspector answers (`ws://127.0.0.1:PORT`), with `inspectorPort`; else undefined. */
  readonly inspectorUrl: URL | undefined;
  /**
   * Stops consumers (in-flight batches get `graceMs`), workerd and the cells. Called again, it
   * returns the first call's promise (the first call's `graceMs` holds).
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Starts a deployment: bundles each Worker, runs them all in one workerd through Miniflare with
 * their bindings, and starts the plugins' background work (queue consumers).
 */
export async function startHost(options: HostOptions): Promise<Host> {
  const log = options.log ?? consoleHostLog;
  const clock = options.clock ?? systemClock;
  const unlock = lockDataDir(options.dataDir);
  const listenHost = options.host ?? "127.0.0.1";
  const listenPort = options.port ?? 8787;
  try {
    const access = dataDirAccessWarning(options.dataDir);
    if (access !== undefined) log.warn(access);
    // Before the port check: a workerd left by a host that was killed holds the port it had.
    for (const pid of await stopLeftoverWorkerd(options.dataDir)) {
      log.warn(`stopped workerd (pid ${pid}), left running by a celld on this data directory that was killed`);
    }
    await checkPortFree(listenHost, listenPort);
  } catch (error) {
    unlock();
    throw error;
  }
  const openFilesLimit = options.openFilesLimit ?? readOpenFilesLimit();
  const openCellsMax = openCellsMaxFor(openFilesLimit);
  if (openFilesLimit !== undefined && openCellsMax < limits.openCellsMax) log.info(openCellsLoweredMessage(openFilesLimit, openCellsMax));
  const consumed = options.deployment.workers.reduce((n, worker) => n + worker.consumers.length, 0);
  if (openFilesLimit !== undefined && consumed > openCellsMax) log.warn(consumedPastOpenCellsMessage(openFilesLimit, openCellsMax, consumed));
  let registry: CellRegistry;
  try {
    registry = new CellRegistry({
      openCellsMax,
      dataDir: options.dataDir,
      clock,
      durability: options.durability ?? "full",
      idleCloseMs: options.cellIdleCloseMs,
      onBackgroundError: (error) => logCellBackgroundError(log, error),
      onWarning: (message) => log.warn(message),
    });
  } catch (error) {
    unlock();
    throw dataDirUnusable(options.dataDir, "creating its cells directory", error);
  }
  // A consumer failing every batch is told of once a window: its error from the handler shim
  // (through workerd's output, below) and its batches' fate from the dispatchers.
  // The shim's reports are printed as workerd's other lines are, once that path is set up below.
  let showReport: (text: string) => void = () => undefined;
  const marks = new QueueErrorMarks();
  const failures = new ConsumerFailureLog(clock, { report: (text) => showReport(text), warn: (message) => log.warn(message) });
  // Filled as the Workers are bundled, before the consumers start: their lines name a
  // service-worker script's "queue" event listener as such.
  const consumerKinds = new Map<string, ConsumerKind>();
  // Consumers with [assets] whose shim exports queueEntrypointName: their batches go through it.
  const queueEntrypoints = new Map<string, string>();
  const queues = new QueuesPlugin({
    failures,
    consumerKindOf: (worker) => consumerKinds.get(worker) ?? "module",
    queueEntrypointOf: (worker) => queueEntrypoints.get(worker),
    deployment: options.deployment,
    registry,
    clock,
    log,
    wallTimeSeconds: options.consumerWallTimeSeconds,
    batchBytesInFlightMax: options.consumerBatchBytesInFlightMax,
    onBatch: options.onBatch,
    dataDir: options.dataDir,
  });
  const plugins: HostPlugin[] = [queues, new CronTriggersPlugin({ deployment: options.deployment, clock, log })];
  let miniflare: Miniflare | undefined;
  let guard: WorkerdGuard | undefined;
  try {
    for (const plugin of plugins) await plugin.prepare();
    const workers: WorkerOptions[] = [];
    const bundled: BundledWorker[] = [];
    const sources = new Set<string>();
    let serviceWorkerScripts = false;
    for (const worker of options.deployment.workers) {
      const bundle = await bundleFor(worker, marks, (message) => log.warn(message), options.bundles?.get(worker.name));
      bundled.push({ name: worker.name, main: worker.main, bundle });
      for (const input of bundle.inputs) sources.add(input);
      if (!bundle.modules) {
        serviceWorkerScripts = true;
        consumerKinds.set(worker.name, "service-worker");
      }
      if (worker.assets !== undefined && worker.consumers.length > 0 && bundle.exports.includes(queueEntrypointName)) {
        queueEntrypoints.set(worker.name, queueEntrypointName);
      }
      const own = workerOptions(worker, bundle, (message) => log.warn(message));
      // Miniflare's inspector proxy shows the Workers marked so, and keeps celld's own out of it.
      if (options.inspectorPort !== undefined) own.unsafeInspectorProxy = true;
      for (const plugin of plugins) {
        const extra = plugin.workerOptions(worker);
        Object.assign(own, extra, {
          serviceBindings: { ...own.serviceBindings, ...extra.serviceBindings },
        });
      }
      workers.push(own);
    }
    // The first Worker answers `url` on a socket of its own, straight into its fetch handler.
    // Miniflare's entry socket runs every request through its entry Worker first (dev tooling:
    // pretty error pages, a made-up request.cf, /cdn-cgi/ trigger routes), which costs about
    // 350 µs of workerd CPU per request; that socket stays, on a free loopback port, for
    // Miniflare's own use. With triggerHandlers the user asked for those routes, and the entry
    // socket takes the Worker's address instead.
    const first = workers[0];
    if (first === undefined) throw new Error("a deployment has at least one Worker");
    const viaEntry = options.triggerHandlers === true;
    if (!viaEntry) first.unsafeDirectSockets = [{ host: listenHost, port: listenPort }];
    for (const plugin of plugins) workers.push(...(await plugin.extraWorkers()));
    // Stack positions name the user's sources, not the bundle; the shim's own frames are dropped.
    const positions = new StackPositions(bundled);
    const output = new RuntimeOutputFilter();
    // Only a service-worker script needs workerd verbose (see ServiceWorkerConsole).
    const serviceWorkerConsole = serviceWorkerScripts ? new ServiceWorkerConsole() : undefined;
    // Until workerd has started: what its output says of a refused start.
    let blame: StartBlame | undefined = new StartBlame(options.deployment.workers);
    let stderrRead: Promise<void> = Promise.resolve();
    // workerd's stdout closes when it exits: after start and before close(), that is a crash.
    let running = false;
    const exited = (): void => {
      if (!running) return;
      running = false;
      log.error(
        "workerd (the Workers runtime) exited unexpectedly: no Worker runs until celld starts again. " +
          "Messages waiting in queues stay there, their attempts not counted.",
      );
      for (const plugin of plugins) plugin.runtimeExited?.();
      options.onRuntimeExit?.();
    };
    const show = (line: string, stream: "stdout" | "stderr") => {
      if (!output.shows(line, stream)) return;
      const shown = positions.rewrite(line);
      if (shown !== undefined) log.runtime(shown, stream);
    };
    showReport = (text) => {
      for (const line of text.split("\n")) show(line, "stderr");
    };
    const forward = (line: string, stream: "stdout" | "stderr") => {
      if (stream === "stderr") {
        blame?.read(line);
        const logged = serviceWorkerConsole?.read(line);
        if (logged === "drop") return;
        // A service-worker script's shim writes its records and reports through its console.
        if (logged !== undefined) return forwardRecord(logged.output) || showConsole(logged.output);
        if (forwardRecord(line)) return;
      }
      show(line, stream);
    };
    /** Whether the line was a shim's queue-error record, now handed on (marks.read). */
    const forwardRecord = (line: string): boolean => {
      const record = marks.read(line);
      if (record === undefined) return false;
      if ("misplaced" in record) showReport(record.misplaced);
      else failures.handlerThrew(record.queue, record.tag, record.text);
      return true;
    };
    // The shim's reports go where a module Worker's shim's do; the script's own output on stdout.
    const showConsole = (output: string): void => {
      const stream = output.startsWith("[celld] ") ? "stderr" : "stdout";
      for (const text of output.split("\n")) show(text, stream);
    };
    setWorkerdV8Flags(options.workerdV8Flags ?? defaultWorkerdV8Flags);
    const workerdBefore = workerdChildren();
    miniflare = new Miniflare({
      workers,
      cf: false,
      ...(viaEntry ? { host: listenHost, port: listenPort, unsafeTriggerHandlers: true } : { host: "127.0.0.1", port: 0 }),
      defaultPersistRoot: join(options.dataDir, "miniflare"),
      // Loopback only, whatever --host says: the inspector runs any code in the Workers.
      ...(options.inspectorPort === undefined ? {} : { inspectorPort: options.inspectorPort, inspectorHost: "127.0.0.1" }),
      verbose: serviceWorkerConsole !== undefined,
      handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
        createInterface({ input: stdout }).on("line", (line) => forward(line, "stdout"));
        const stderrLines = createInterface({ input: stderr }).on("line", (line) => forward(line, "stderr"));
        stderrRead = new Promise((resolve) => stderrLines.once("close", resolve));
        stdout.once("close", exited);
      },
    });
    await miniflare.ready.catch(async (error: unknown) => {
      if (!isRuntimeFailure(error)) throw error;
      // workerd has exited, but the lines that say why (and name the config key) may still be in
      // the pipe: read to its end, which takes well under a second.
      await Promise.race([stderrRead, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
      throw new RuntimeStartError(blame?.issues ?? []);
    });
    blame = undefined;
    guard = WorkerdGuard.start(options.dataDir, workerdBefore);
    const mf = miniflare;
    const url = viaEntry ? await mf.ready : await mf.unsafeGetDirectURL(first.name);
    const inspectorUrl = options.inspectorPort === undefined ? undefined : await mf.getInspectorURL();
    const context: PluginStartContext = {
      directUrl: (name) => mf.unsafeGetDirectURL(name),
      // Through Miniflare's proxy to workerd: a few ms a run, which a run a minute at most can afford.
      runScheduled: async (name, event) => {
        const worker = await mf.getWorker(name);
        const result = await worker.scheduled({ cron: event.cron, scheduledTime: new Date(event.scheduledTime) });
        return { outcome: result.outcome };
      },
    };
    for (const plugin of plugins) await plugin.start(context);
    running = true;
    // Each step of a close runs once: a second would close servers already closed, and unlock a
    // data directory another host may have taken since. A close called again (a signal during a
    // shutdown, a caller's cleanup after its own close) gets the first's promise, so it settles
    // when, and as, the first does.
    let closing: Promise<void> | undefined;
    const close = async (graceMs: number): Promise<void> => {
      running = false;
      // Together: each plugin's in-flight work gets the same grace, not one grace after another's.
      await Promise.all(plugins.map((plugin) => plugin.stop(graceMs)));
      // Miniflare's dispose destroys workerd's pipes and kills it, so nothing more can come from
      // its output: what the failure log still counts is said now.
      await mf.dispose();
      failures.flush();
      guard?.stop();
      for (const plugin of plugins) await plugin.dispose();
      await registry.closeAll();
      unlock();
    };
    return {
      url,
      registry,
      unopenedQueues: queues.unopenedQueues,
      miniflare: mf,
      sources: [...sources],
      inspectorUrl,
      close: (graceMs = 0) => (closing ??= close(graceMs)),
    };
  } catch (error) {
    for (const plugin of plugins) await plugin.stop(0).catch(() => undefined);
    await miniflare?.dispose().catch(() => undefined);
    guard?.stop();
    for (const plugin of plugins) await plugin.dispose().catch(() => undefined);
    await registry.closeAll();
    unlock();
    // A queue that cannot be opened or written at start (a disk that filled up): one line for
    // the operator, as for the directory itself.
    if (isCellError(error, "ERR_STORAGE")) throw dataDirUnusable(options.dataDir, `starting queue "${error.storage?.queue ?? "?"}"`, error);
    throw error;
  }
}

/**
 * A module Worker's bundle gets the shim that prints what its fetch(), queue() and scheduled() handlers throw.
 * The shim imports main, so the second bundle collects the same Text, Data and Wasm modules, under
 * the same names.
 */
async function bundleFor(
  worker: WorkerConfig,
  marks: QueueErrorMarks,
  warn: (message: string) => void,
  built: WorkerBundle | undefined,
): Promise<WorkerBundle> {
  const plain = built ?? (await bundleWorker(worker));
  const queues = worker.consumers.map((c) => c.queue);
  const consumer = { worker: worker.name, queues, token: marks.issue(queues) };
  const uses = handlerUses(worker.name, queues, worker.crons);
  if (!plain.exports.includes("default")) {
    // Not shimmed, so the shim's warning at load cannot say it; workerd would say so only once the
    // first batch had failed, and then ask for addEventListener("queue"), which a module cannot use.
    for (const use of uses) {
      if (plain.modules) warn(noDefaultExportWarning(use));
      else if (addsListener(plain.code, use.handler) === "no") warn(noListenerWarning(use, worker.main));
    }
    if (!plain.modules) return withServiceWorkerShim(plain, consumer.token);
    return plain;
  }
  return bundleWorker(worker, { entrySource: handlerErrorShim(worker.main, consumer, uses) });
}
