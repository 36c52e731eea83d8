import { existsSync } from "node:fs";
import { workersQueuesOf } from "../cloudflare-api/queues/workers-queues.ts";
import { readAddedConsumers } from "../cloudflare-api/queues/added-consumers-of.ts";
import { AddedConsumers } from "../plugins/added-consumers.ts";
import { constants } from "node:os";
import { dirname, join, relative } from "node:path";
import Database from "better-sqlite3";
import { storageCause } from "@celld/queue-cell";
import type { BatchReport } from "@celld/bindings";
import { ApiKeyStore, defaultWorkerEnv, startApiServer, type AnsweredRequest, type ApiServer } from "../api/index.ts";
import { bundleWorker, type WorkerBundle } from "../bundle/bundle.ts";
import {
  devVarsFileNames,
  formatIssue,
  formatWarnings,
  isConfigError,
  loadDeployment,
  type ConfigError,
  type Deployment,
  type WorkerConfig,
} from "../config/index.ts";
import { DataDirUnusableError } from "../host/data-dir-lock.ts";
import { consoleHostLog, watchOutputStreams, type HostLog } from "../host/host-log.ts";
import { ActivityLog } from "../logs/activity-log.ts";
import { JsonHostLog } from "../logs/json-log.ts";
import { CelldMetrics } from "../metrics/celld-metrics.ts";
import { MetricsEndpoint } from "../metrics/metrics-endpoint.ts";
import { startHost, type Host } from "../host/host.ts";
import { checkPortFree } from "../host/port-check.ts";
import { readOpenFilesLimit } from "../host/open-files-limit.ts";
import { budgetLine, checkConnectionsMax, descriptorBudget } from "../front/descriptor-budget.ts";
import { workerUrlLines } from "../front/worker-urls.ts";
import type { FrontRequest } from "../front/front-server.ts";
import type { DevArgs } from "./args.ts";
import { dataDirLine } from "./data-dir-line.ts";
import { exitStatus } from "./exit-status.ts";
import { watchNpmParent } from "./npm-parent-watch.ts";
import { watchSources, type SourceWatch } from "./source-watch.ts";
import { describeStartFailure, printFailureLines } from "./start-failure.ts";

/** How long in-flight batches may run on shutdown before they are handed back to their queues. */
const shutdownGraceMs = 10_000;
/** A queue nobody has used for this long gives back its file handle and memory until next use. */
const cellIdleCloseMs = 5 * 60_000;

/**
 * `celld dev`: validates the whole deployment, starts it, and stops cleanly on SIGINT, SIGTERM or
 * SIGHUP. With `--watch`, a change to a config, its dev vars or a Worker's sources restarts the
 * Workers on the same data directory, once the new deployment has loaded and bundled.
 */
export async function dev(args: DevArgs): Promise<number> {
  return new DevSession(args).run();
}

/**
 * One `celld dev` run: what runs now (deployment, host, API) and the ports it keeps across
 * restarts, as fields the stages share. The stages: load, check the ports, start the host, start
 * the API, take the signals, print the banner, watch.
 */
class DevSession {
  private readonly log: HostLog;
  private readonly activity: ActivityLog | undefined;
  /** Kept across restarts: counters count from celld's start. Only the API port serves them. */
  private readonly metrics: CelldMetrics | undefined;
  private deployment!: Deployment;
  private host: Host | undefined;
  private api: ApiServer | undefined;
  private apiKeys: ApiKeyStore | undefined;
  // A restart keeps the ports the first start listened on, free ones picked for a port 0 too.
  private port: number;
  private inspectorPort: number | undefined;
  /** Set when stdout or stderr was closed: acted on once the stop exists. */
  private outputClosed: string | undefined;
  private stopping = false;
  /** A restart and the stop run one after another, never together. */
  private steps: Promise<void> = Promise.resolve();
  private watch: SourceWatch | undefined;
  /** A reload that is asked for and has not begun: the files it is for. */
  private asked: Set<string> | undefined;
  private lastSources: readonly string[] = [];
  /** Set once the stop exists (stage "take the signals"); until then a call does nothing. */
  private stop: (reason: string, exitCode?: number) => void = () => undefined;
  /** The two ports' connection maxima, and the line saying where the descriptors go. */
  private maxima!: { workers: number; api: number | undefined; line: string };
  /** A stop signal that came once the Workers had started, before the stop existed. */
  private signalled: StopSignal | undefined;
  /** The consumers added through the API: every start of the host runs them, the API changes them. */
  private added = new AddedConsumers();

  constructor(private readonly args: DevArgs) {
    this.port = args.port;
    this.inspectorPort = args.inspectorPort;
    this.log = hostLogFor(args);
    this.activity = args.logRequests ? new ActivityLog(this.log) : undefined;
    this.metrics = args.apiPort === undefined ? undefined : new CelldMetrics({ workerEnv: defaultWorkerEnv });
  }

  async run(): Promise<number> {
    const { args, log } = this;
    watchOutputStreams((stream, code) => {
      this.outputClosed = `${stream} was closed (${code})`;
      this.stopForOutput();
    });
    for (const warning of args.warnings) log.warn(warning);
    const loaded = load(args);
    if (!loaded.ok) {
      printConfigIssues(loaded.error, "nothing was started");
      return exitStatus.config;
    }
    this.deployment = loaded.deployment;
    // Before anything starts, as the Workers' port is: once workerd runs, a taken API port could
    // only fail as a stack trace.
    if (args.apiPort !== undefined) await checkPortFree(args.apiHost, args.apiPort, "--api-port");
    if (args.inspectorPort !== undefined) await checkPortFree("127.0.0.1", args.inspectorPort, "--inspector-port");
    // Where the open-files limit goes (limits.md#connections); a maximum past it is refused here.
    const maxima = connectionMaxima(args, this.deployment);
    if (!maxima.ok) {
      console.error(`celld: ${maxima.error}`);
      return exitStatus.usage;
    }
    this.maxima = maxima;
    this.added = new AddedConsumers(this.readAdded());
    // The stop signals are celld's before the Workers start, so before any batch can run.
    for (const signal of stopSignals) ourSignalListeners.set(signal, () => this.signalledEarly(signal));
    takeSignals();
    // A start that fails goes to main's report (start-failure.ts), as one line where it can.
    const host = await this.startHost();
    this.port = Number(host.url.port);
    if (host.inspectorUrl !== undefined) this.inspectorPort = Number(host.inspectorUrl.port);
    if (args.apiPort !== undefined) {
      const failed = await this.startFirstApi(host);
      if (failed !== undefined) return failed;
    }
    const stopped = this.takeStop();
    // A stop already under way needs no banner and no watch.
    if (this.stopping) return stopped;
    // Only once the signals are ours: a supervisor may signal as soon as it reads this.
    this.printBanner(host, this.api);
    if (args.watch) this.startWatch();
    return stopped;
  }

  /** Those the catalog holds; none, said in a line, if it cannot be read (the API's start then says why). */
  private readAdded(): ReturnType<typeof readAddedConsumers> {
    try {
      return readAddedConsumers(this.args.dataDir);
    } catch (error) {
      this.log.warn(`the consumers added through the API could not be read, so none of them runs: ${(error as Error).message}`);
      return [];
    }
  }

  private startHost(bundles?: ReadonlyMap<string, WorkerBundle>): Promise<Host> {
    return startHost({
      deployment: this.deployment,
      bundles,
      dataDir: this.args.dataDir,
      port: this.port,
      host: this.args.host,
      workersDevDomain: this.args.workersDevDomain,
      connectionsMax: this.maxima.workers,
      log: this.log,
      cellIdleCloseMs,
      cellThreads: this.args.cellThreads,
      triggerHandlers: this.args.testScheduled,
      inspectorPort: this.inspectorPort,
      callerHandlesStopSignals: true,
      addedConsumers: this.added,
      // workerd cannot exit unexpectedly before startHost returns, and stop exists by then.
      onRuntimeExit: () => {
        if (!this.stopping) this.stop("workerd exited too often", exitStatus.failed);
      },
      metrics: this.metrics,
      ...(this.activity === undefined
        ? {}
        : {
            onBatch: (report: BatchReport) => this.activity!.batch(report),
            onFrontAnswered: (r: FrontRequest) => this.activity!.request({ ...r, port: "workers" }),
          }),
    }).then((host) => {
      this.metrics?.connections.watch("workers", () => host.front.stats.connections);
      return (this.host = host);
    });
  }

  private async startApi(host: Host): Promise<ApiServer> {
    const { args, log, metrics, activity } = this;
    const server = await startApiServer({
      registry: host.registry,
      keys: this.apiKeys!,
      dataDir: args.dataDir,
      port: args.apiPort!,
      host: args.apiHost,
      workerQueues: { declared: () => this.deployment.queues },
      cloudflareServices: { workersQueues: workersQueuesOf(() => this.deployment) },
      addedConsumers: this.added,
      onInternalError: (error) => log.error("the queues API failed a request", error),
      onStorageFailure: (line) => log.error(`the queues API refused calls: ${line}`),
      connectionsMax: this.maxima.api,
      onConnectionsClosed: (line) => log.warn(line),
      ...(metrics === undefined
        ? {}
        : { metrics: new MetricsEndpoint({ metrics, registry: host.registry, public: args.metricsPublic, consumers: () => host.consumerLoads() }) }),
      ...(activity === undefined ? {} : { onAnswered: (r: AnsweredRequest) => activity.request({ ...r, port: "api" }) }),
    });
    metrics?.connections.watch("api", () => server.connections);
    return server;
  }

  /** The API's first start; an exit status if it could not start (the host is closed then). */
  private async startFirstApi(host: Host): Promise<number | undefined> {
    try {
      this.apiKeys = ApiKeyStore.open(this.args.dataDir);
      this.api = await this.startApi(host);
      return undefined;
    } catch (error) {
      const opening = this.apiKeys === undefined ? "opening api/keys.sqlite" : "opening api/catalog.sqlite";
      this.apiKeys?.close();
      await host.close();
      // The API's own files, damaged, unreadable or a newer celld's, are the operator's to fix as
      // a queue's are: one line naming the file and the cause. (A port in use is not SQLite's,
      // and is thrown.)
      if (!(error instanceof Database.SqliteError) && storageCause(error).cause !== "newer-format") throw error;
      console.error(`celld: ${new DataDirUnusableError(this.args.dataDir, opening, error).message}`);
      return exitStatus.failed;
    }
  }

  /** Stops the API server and the host that run now, if any; the key store stays open. */
  private async closeRunning(graceMs: number): Promise<void> {
    const [runningApi, runningHost] = [this.api, this.host];
    this.api = undefined;
    this.host = undefined;
    // Closing the host hands running batches back and closes the cells: a failed API close
    // must not skip it.
    try {
      await runningApi?.close();
    } finally {
      await runningHost?.close(graceMs);
    }
  }

  /**
   * A stop signal before the stop exists. While the Workers start nothing has run, and it exits at
   * once, as Miniflare's own listener did; once they have started (the consumers too), it is kept
   * for the stop, and a second exits at once.
   */
  private signalledEarly(signal: StopSignal): void {
    if (this.host === undefined) exitWhileStarting(signal, this.log);
    if (this.signalled !== undefined) exitAtOnce(signal, this.deployment, this.log);
    this.signalled = signal;
  }

  private stopForOutput(): void {
    if (!this.stopping && this.outputClosed !== undefined) this.stop(this.outputClosed, exitStatus.failed);
  }

  /**
   * Sets up the stop, makes the stop signals celld's, and returns what the run resolves to: 0 for
   * a signal, 1 when celld stops on its own (workerd went away, its output was closed), so that a
   * supervisor's Restart=on-failure starts it again.
   */
  private takeStop(): Promise<number> {
    return new Promise<number>((resolve) => {
      this.stop = (reason, exitCode = exitStatus.ok) => this.stopOnce(reason, exitCode, resolve);
      this.stopForOutput();
      for (const signal of stopSignals) ourSignalListeners.set(signal, () => this.stop(signal));
      takeSignals();
      if (this.signalled !== undefined && !this.stopping) this.stop(this.signalled);
      watchNpmParent(() => {
        if (!this.stopping) this.stop("the npm script that started celld has ended");
      });
    });
  }

  private stopOnce(reason: string, exitCode: number, resolve: (code: number) => void): void {
    const { log } = this;
    if (this.stopping) exitAtOnce(reason, this.deployment, log);
    this.stopping = true;
    this.watch?.close();
    log.info(`${reason}: stopping (${inFlightGrace(this.deployment)})...`);
    // After a restart under way: it may be starting a host this has to close.
    this.steps = this.steps
      .then(async () => {
        try {
          await this.closeRunning(shutdownGraceMs);
        } finally {
          this.apiKeys?.close();
        }
      })
      .then(
        () => {
          log.info("stopped");
          resolve(exitCode);
        },
        (error: unknown) => {
          log.error("shutdown failed", error);
          resolve(exitStatus.failed);
        },
      );
  }

  private watched(): string[] {
    return [...watchedFiles(this.deployment, this.args.environment), ...this.lastSources];
  }

  // The asset router lists a directory's files at start: one added or removed needs a restart.
  private assetTrees(): string[] {
    return this.deployment.workers.flatMap((worker) => worker.assets?.directory ?? []);
  }

  private startWatch(): void {
    this.lastSources = this.host!.sources;
    this.watch = watchSources(this.watched(), (changed) => this.changed(changed), { trees: this.assetTrees() });
    const { deployment } = this;
    const configs = deployment.workers.length === 1 ? "its config" : `its ${deployment.workers.length} configs`;
    const sources = `${this.lastSources.length} source file${this.lastSources.length === 1 ? "" : "s"}`;
    const trees = this.assetTrees().length;
    const assets = trees === 0 ? "" : `, ${trees === 1 ? "its assets directory" : "their assets directories"}`;
    this.log.info(`--watch: a change to ${configs}, dev vars (.dev.vars, .env)${assets} or ${sources} restarts the Workers`);
  }

  private changed(changed: readonly string[]): void {
    if (this.stopping) return;
    if (this.asked !== undefined) {
      for (const path of changed) this.asked.add(path);
      return;
    }
    this.asked = new Set(changed);
    this.steps = this.steps
      .then(() => this.restart())
      .catch((error: unknown) => this.log.error("restarting the Workers failed; no Worker runs until a watched file changes again", error))
      .finally(() => this.watch?.update(this.watched(), this.assetTrees()));
  }

  private async restart(): Promise<void> {
    const { args, log } = this;
    const changed = [...this.asked!];
    this.asked = undefined;
    if (this.stopping) return;
    log.info(`${changed.map((path) => relative(process.cwd(), path)).join(", ")} changed: restarting (${inFlightGrace(this.deployment)})`);
    const next = load(args);
    if (!next.ok) {
      printConfigIssues(next.error, "the running Workers go on as they were");
      return;
    }
    // Bundled before anything stops: a typo leaves the running Workers as they were.
    const bundles = await bundleOrReport(next.deployment, log);
    if (bundles === undefined || this.stopping) return;
    await this.closeRunning(shutdownGraceMs);
    this.deployment = next.deployment;
    // A stop asked for while the Workers were finishing needs nothing started.
    if (this.stopping) return;
    let host: Host;
    try {
      host = await this.startHost(bundles);
    } catch (error) {
      const failure = describeStartFailure(error);
      if (failure === undefined) throw error;
      printFailureLines(failure.lines);
      log.warn("no Worker runs until a watched file changes again");
      return;
    }
    // A stop asked for while they started closes them next.
    if (this.stopping) return;
    this.lastSources = host.sources;
    if (this.apiKeys !== undefined) {
      try {
        this.api = await this.startApi(host);
      } catch (error) {
        log.error("the queues API could not start again; the Workers run without it until the next restart", error);
      }
    }
    this.printBanner(host, this.api);
  }

  private printBanner(h: Host, a: ApiServer | undefined): void {
    const { args, log, deployment } = this;
    for (const line of workerUrlLines(h.front.router, deployment.workers, h.url)) log.info(line);
    log.info(this.maxima.line);
    if (args.testScheduled) {
      log.info(`its scheduled() handler runs at ${h.url.href}cdn-cgi/handler/scheduled?cron=*+*+*+*+* (--test-scheduled)`);
    }
    if (a !== undefined) log.info(`queues API listening on ${a.url}/v1 (keys: celld keys create ...)`);
    if (a !== undefined) {
      log.info(`dashboard at ${a.url}/; metrics at ${a.url}/metrics (${args.metricsPublic ? "public" : "a key with metrics:read"})`);
    }
    if (h.inspectorUrl !== undefined) {
      log.info(`inspector listening on ${h.inspectorUrl.href} (Chrome: chrome://inspect, Configure... 127.0.0.1:${h.inspectorUrl.port})`);
    }
    const usage = h.registry.diskUsage();
    const configured = deployment.queues.filter((queue) => existsSync(h.registry.pathOf(queue))).length;
    log.info(dataDirLine(args.dataDir, usage, Math.max(0, usage.queues - configured)));
    if (deployment.queues.length > 0) log.info(queuesLine(deployment.queues, h.unopenedQueues));
  }
}

/** Each Worker's plain bundle, or undefined once a failure to bundle is printed. */
async function bundleOrReport(deployment: Deployment, log: HostLog): Promise<Map<string, WorkerBundle> | undefined> {
  const bundles = new Map<string, WorkerBundle>();
  for (const worker of deployment.workers) {
    try {
      bundles.set(worker.name, await bundleWorker(worker));
    } catch (error) {
      const failure = describeStartFailure(error);
      if (failure === undefined) throw error;
      printFailureLines(failure.lines);
      log.warn("the running Workers go on as they were");
      return undefined;
    }
  }
  return bundles;
}

type Maxima = { ok: true; workers: number; api: number | undefined; line: string } | { ok: false; error: string };

/**
 * The connection maxima of both ports: given on the command line (within the descriptor budget),
 * else the budget's; and the start line saying where the descriptors go.
 */
function connectionMaxima(args: DevArgs, deployment: Deployment): Maxima {
  const api = args.apiPort !== undefined;
  try {
    const budget = descriptorBudget({ openFilesLimit: readOpenFilesLimit(), workers: deployment.workers.length, api });
    if (args.connectionsMax !== undefined) checkConnectionsMax("--max-connections", args.connectionsMax, budget.workersConnectionsMax, budget.limit);
    if (args.apiConnectionsMax !== undefined) checkConnectionsMax("--api-max-connections", args.apiConnectionsMax, budget.apiConnectionsMax, budget.limit);
    const workers = args.connectionsMax ?? budget.workersConnectionsMax;
    const apiMax = api ? (args.apiConnectionsMax ?? budget.apiConnectionsMax) : undefined;
    return { ok: true, workers, api: apiMax, line: budgetLine(budget, { workers, api: apiMax }) };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

/** What a stop waits for: the batches, and the cron runs of a deployment that has crons. */
function hasCrons(deployment: Deployment): boolean {
  return deployment.workers.some((w) => w.crons.length > 0);
}

function inFlightGrace(deployment: Deployment): string {
  return `in-flight ${hasCrons(deployment) ? "batches and cron runs" : "batches"} get ${shutdownGraceMs / 1000} s to finish`;
}

const stopSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
type StopSignal = (typeof stopSignals)[number];
const ourSignalListeners = new Map<StopSignal, () => void>();

/**
 * Makes celld's listeners the only ones of the stop signals, from before the Workers start.
 * Miniflare's exit hook, which exits the process on SIGINT and SIGTERM at once, before a graceful
 * stop could run, is taken off by the host as each Miniflare is made (callerHandlesStopSignals);
 * its "exit" hook stays and still stops workerd if we exit abruptly. Ours are added before others
 * are removed: with none left for a moment, Node stops watching the signal and starts again, and
 * a signal arriving just then was seen to be lost (celld ran on after a supervisor's SIGTERM).
 * SIGHUP too: a hangup (the terminal it ran in closed) would otherwise end celld at once, as a crash.
 */
function takeSignals(): void {
  for (const [signal, ours] of ourSignalListeners) {
    if (!process.listeners(signal).includes(ours)) process.on(signal, ours);
    for (const listener of process.listeners(signal)) if (listener !== ours) process.removeListener(signal, listener);
  }
}

/** A stop signal while the first Workers start: nothing has run that a stop would finish or hand back. */
function exitWhileStarting(signal: StopSignal, log: HostLog): never {
  log.info(`${signal}: exiting, as the Workers were still starting`);
  process.exit(128 + constants.signals[signal]);
}

/** A stop signal during a stop: the user insists. */
function exitAtOnce(reason: string, deployment: Deployment, log: HostLog): never {
  const cutOff = hasCrons(deployment) ? "; cron runs still going are cut off, not run again" : "";
  log.warn(`${reason} again: exiting at once; messages in running batches return to their queues at the next start${cutOff}`);
  // As a shell reports a process a signal ended: 128 + its number (130 SIGINT, 143 SIGTERM).
  process.exit(128 + (constants.signals[reason as NodeJS.Signals] ?? 0));
}

/** `--log-format json`: every line as a JSON object; else celld's text lines. */
function hostLogFor(args: DevArgs): HostLog {
  return args.logFormat === "json" ? new JsonHostLog() : consoleHostLog;
}

type Loaded = { ok: true; deployment: Deployment } | { ok: false; error: ConfigError };

/** The deployment the command line names, its warnings and its Workers' dev vars told. */
function load(args: DevArgs): Loaded {
  const log = hostLogFor(args);
  let deployment: Deployment;
  try {
    deployment = loadDeployment(args.configs, { environment: args.environment });
  } catch (error) {
    if (!isConfigError(error)) throw error;
    return { ok: false, error };
  }
  for (const line of formatWarnings(deployment.warnings)) log.warn(line);
  // The names differ from the files' (`app-production`), and Durable Object storage follows them.
  if (args.environment !== undefined) {
    log.info(`environment "${args.environment}": Workers ${deployment.workers.map((w) => `"${w.name}"`).join(", ")}`);
  }
  // Names only: the values are secrets.
  for (const { name, devVars } of deployment.workers) {
    if (devVars !== undefined) log.info(`Worker "${name}": ${devVarsSummary(devVars)}`);
  }
  return { ok: true, deployment };
}

function printConfigIssues(error: ConfigError, outcome: string): void {
  for (const line of formatWarnings(error.warnings)) consoleHostLog.warn(line);
  const issues = error.issues.map((issue) => `  ${formatIssue(issue)}`);
  printFailureLines([`the deployment has ${error.issues.length} error(s); ${outcome}:`, ...issues]);
}


/** The configs and every dev-vars file each could read, whether or not it is there now. */
function watchedFiles(deployment: Deployment, environment: string | undefined): string[] {
  const files = new Set<string>();
  for (const worker of deployment.workers) {
    files.add(worker.configPath);
    for (const name of devVarsFileNames(environment)) files.add(join(dirname(worker.configPath), name));
  }
  return [...files];
}

/** The banner's queues: a queue whose file could not be opened is not among those that run. */
function queuesLine(declared: readonly string[], unopened: readonly string[]): string {
  const open = declared.filter((q) => !unopened.includes(q));
  const notOpened = unopened.length === 0 ? "" : `; not opened (see the error above): ${unopened.join(", ")}`;
  return `queues: ${open.length === 0 ? "none" : open.join(", ")}${notOpened}`;
}

/**
 * What a Worker took from `.dev.vars`, `.env` or the environment, by name. The environment's
 * names are counted, not listed, past a screenful: CLOUDFLARE_INCLUDE_PROCESS_ENV takes them all.
 */
function devVarsSummary(devVars: NonNullable<WorkerConfig["devVars"]>): string {
  const fromEnv = new Set(devVars.fromEnvironment);
  const fromFiles = devVars.names.filter((n) => !fromEnv.has(n));
  const count = (n: number) => `${n} variable${n === 1 ? "" : "s"}`;
  const listed = (names: string[]) => (names.length === 0 ? "" : ` (${names.join(", ")})`);
  const parts: string[] = [];
  if (devVars.paths.length > 0) parts.push(`${count(fromFiles.length)} from ${devVars.paths.join(" and ")}${listed(fromFiles)}`);
  if (devVars.fromEnvironment.length > 0) {
    const names = devVars.fromEnvironment.length <= 20 ? listed(devVars.fromEnvironment) : "";
    parts.push(`${count(devVars.fromEnvironment.length)} from the environment${names}`);
  }
  if (parts.length === 0) parts.push("0 variables");
  const leftOut = devVars.leftOut.length === 0 ? "" : `; left out ${devVars.leftOut.join(", ")}, not in secrets.required`;
  return `loaded ${parts.join(" and ")}${leftOut}`;
}
