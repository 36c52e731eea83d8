import { existsSync } from "node:fs";
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
  const log = hostLogFor(args);
  const activity = args.logRequests ? new ActivityLog(log) : undefined;
  // Kept across restarts: counters count from celld's start. Only the API port serves them.
  const metrics = args.apiPort === undefined ? undefined : new CelldMetrics({ workerEnv: defaultWorkerEnv });
  // Set once the shutdown below exists; until then a closed output is remembered and acted on then.
  let outputClosed: string | undefined;
  let stopForOutput = (): void => {};
  watchOutputStreams((stream, code) => {
    outputClosed = `${stream} was closed (${code})`;
    stopForOutput();
  });
  for (const warning of args.warnings) log.warn(warning);
  const loaded = load(args);
  if (!loaded.ok) {
    printConfigIssues(loaded.error, "nothing was started");
    return exitStatus.config;
  }
  let deployment = loaded.deployment;

  // Before anything starts, as the Workers' port is: once workerd runs, a taken API port could
  // only fail as a stack trace.
  if (args.apiPort !== undefined) await checkPortFree(args.apiHost, args.apiPort, "--api-port");
  if (args.inspectorPort !== undefined) await checkPortFree("127.0.0.1", args.inspectorPort, "--inspector-port");

  // Set once the shutdown below exists; workerd cannot exit unexpectedly before startHost returns.
  let runtimeExited = (): void => {};
  // A restart keeps the ports the first start listened on, free ones picked for a port 0 too.
  let port = args.port;
  let inspectorPort = args.inspectorPort;
  const start = (d: Deployment, bundles?: ReadonlyMap<string, WorkerBundle>): Promise<Host> =>
    startHost({
      deployment: d,
      bundles,
      dataDir: args.dataDir,
      port,
      host: args.host,
      log,
      cellIdleCloseMs,
      triggerHandlers: args.testScheduled,
      inspectorPort,
      onRuntimeExit: () => runtimeExited(),
      metrics,
      ...(activity === undefined ? {} : { onBatch: (report: BatchReport) => activity.batch(report) }),
    });
  // A start that fails goes to main's report (start-failure.ts), as one line where it can.
  let host: Host | undefined = await start(deployment);
  port = Number(host.url.port);
  if (host.inspectorUrl !== undefined) inspectorPort = Number(host.inspectorUrl.port);
  let api: ApiServer | undefined;
  let apiKeys: ApiKeyStore | undefined;
  const startApi = async (h: Host): Promise<ApiServer> => {
    const server = await startApiServer({
      registry: h.registry,
      keys: apiKeys!,
      dataDir: args.dataDir,
      port: args.apiPort!,
      host: args.apiHost,
      workerQueues: { declared: () => deployment.queues },
      onInternalError: (error) => log.error("the queues API failed a request", error),
      onStorageFailure: (line) => log.error(`the queues API refused calls: ${line}`),
      ...(metrics === undefined
        ? {}
        : { metrics: new MetricsEndpoint({ metrics, registry: h.registry, public: args.metricsPublic, consumers: () => h.consumerLoads() }) }),
      ...(activity === undefined ? {} : { onAnswered: (r: AnsweredRequest) => activity.request({ ...r, port: "api" }) }),
    });
    metrics?.connections.watch("api", () => server.connections);
    return server;
  };
  if (args.apiPort !== undefined) {
    try {
      apiKeys = ApiKeyStore.open(args.dataDir);
      api = await startApi(host);
    } catch (error) {
      const opening = apiKeys === undefined ? "opening api/keys.sqlite" : "opening api/catalog.sqlite";
      apiKeys?.close();
      await host.close();
      // The API's own files, damaged, unreadable or a newer celld's, are the operator's to fix as
      // a queue's are: one line naming the file and the cause. (A port in use is not SQLite's,
      // and is thrown.)
      if (!(error instanceof Database.SqliteError) && storageCause(error).cause !== "newer-format") throw error;
      console.error(`celld: ${new DataDirUnusableError(args.dataDir, opening, error).message}`);
      return exitStatus.failed;
    }
  }
  /** Stops the API server and the host that run now, if any; the key store stays open. */
  const closeRunning = async (graceMs: number): Promise<void> => {
    const [runningApi, runningHost] = [api, host];
    api = undefined;
    host = undefined;
    // Closing the host hands running batches back and closes the cells: a failed API close
    // must not skip it.
    try {
      await runningApi?.close();
    } finally {
      await runningHost?.close(graceMs);
    }
  };
  let stopping = false;
  // A restart and the stop run one after another, never together.
  let steps: Promise<void> = Promise.resolve();
  let watch: SourceWatch | undefined;
  const stopped = new Promise<number>((resolve) => {
    /**
     * `exitCode`: 0 for a signal, 1 when celld stops on its own (workerd went away, its output was
     * closed), so that a supervisor's Restart=on-failure starts it again.
     */
    const stop = (reason: string, exitCode: number = exitStatus.ok): void => {
      if (stopping) {
        const cutOff = hasCrons(deployment) ? "; cron runs still going are cut off, not run again" : "";
        log.warn(`${reason} again: exiting at once; messages in running batches return to their queues at the next start${cutOff}`);
        // As a shell reports a process a signal ended: 128 + its number (130 SIGINT, 143 SIGTERM).
        process.exit(128 + (constants.signals[reason as NodeJS.Signals] ?? 0));
      }
      stopping = true;
      watch?.close();
      log.info(`${reason}: stopping (${inFlightGrace(deployment)})...`);
      // After a restart under way: it may be starting a host this has to close.
      steps = steps
        .then(async () => {
          try {
            await closeRunning(shutdownGraceMs);
          } finally {
            apiKeys?.close();
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
    };
    runtimeExited = () => {
      if (!stopping) stop("workerd exited too often", exitStatus.failed);
    };
    stopForOutput = () => {
      if (!stopping && outputClosed !== undefined) stop(outputClosed, exitStatus.failed);
    };
    stopForOutput();
    for (const signal of stopSignals) ourSignalListeners.set(signal, () => stop(signal));
    takeSignals();
    watchNpmParent(() => {
      if (!stopping) stop("the npm script that started celld has ended");
    });
  });
  // Only once the signals are ours: a supervisor may signal as soon as it reads this.
  printBanner(host, api);
  if (!args.watch) return stopped;

  /** A reload that is asked for and has not begun: the files it is for. */
  let asked: Set<string> | undefined;
  let lastSources = host.sources;
  const watched = (): string[] => [...watchedFiles(deployment, args.environment), ...lastSources];
  // The asset router lists a directory's files at start: one added or removed needs a restart.
  const assetTrees = (): string[] => deployment.workers.flatMap((worker) => worker.assets?.directory ?? []);
  const restart = async (): Promise<void> => {
    const changed = [...asked!];
    asked = undefined;
    if (stopping) return;
    log.info(`${changed.map((path) => relative(process.cwd(), path)).join(", ")} changed: restarting (${inFlightGrace(deployment)})`);
    const next = load(args);
    if (!next.ok) {
      printConfigIssues(next.error, "the running Workers go on as they were");
      return;
    }
    // Bundled before anything stops: a typo leaves the running Workers as they were.
    const bundles = new Map<string, WorkerBundle>();
    for (const worker of next.deployment.workers) {
      try {
        bundles.set(worker.name, await bundleWorker(worker));
      } catch (error) {
        const failure = describeStartFailure(error);
        if (failure === undefined) throw error;
        printFailureLines(failure.lines);
        log.warn("the running Workers go on as they were");
        return;
      }
    }
    if (stopping) return;
    await closeRunning(shutdownGraceMs);
    deployment = next.deployment;
    // A stop asked for while the Workers were finishing needs nothing started.
    if (stopping) return;
    try {
      host = await start(deployment, bundles);
    } catch (error) {
      const failure = describeStartFailure(error);
      if (failure === undefined) throw error;
      printFailureLines(failure.lines);
      log.warn("no Worker runs until a watched file changes again");
      return;
    }
    takeSignals();
    lastSources = host.sources;
    if (apiKeys !== undefined) {
      try {
        api = await startApi(host);
      } catch (error) {
        log.error("the queues API could not start again; the Workers run without it until the next restart", error);
      }
    }
    printBanner(host, api);
  };
  watch = watchSources(watched(), (changed) => {
    if (stopping) return;
    if (asked !== undefined) {
      for (const path of changed) asked.add(path);
      return;
    }
    asked = new Set(changed);
    steps = steps
      .then(restart)
      .catch((error: unknown) => log.error("restarting the Workers failed; no Worker runs until a watched file changes again", error))
      .finally(() => watch?.update(watched(), assetTrees()));
  }, { trees: assetTrees() });
  const configs = deployment.workers.length === 1 ? "its config" : `its ${deployment.workers.length} configs`;
  const sources = `${lastSources.length} source file${lastSources.length === 1 ? "" : "s"}`;
  const trees = assetTrees().length;
  const assets = trees === 0 ? "" : `, ${trees === 1 ? "its assets directory" : "their assets directories"}`;
  log.info(`--watch: a change to ${configs}, dev vars (.dev.vars, .env)${assets} or ${sources} restarts the Workers`);
  return stopped;

  function printBanner(h: Host, a: ApiServer | undefined): void {
    const first = deployment.workers[0]!;
    log.info(`Worker "${first.name}" listening on ${h.url.href}`);
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

/** What a stop waits for: the batches, and the cron runs of a deployment that has crons. */
function hasCrons(deployment: Deployment): boolean {
  return deployment.workers.some((w) => w.crons.length > 0);
}

function inFlightGrace(deployment: Deployment): string {
  return `in-flight ${hasCrons(deployment) ? "batches and cron runs" : "batches"} get ${shutdownGraceMs / 1000} s to finish`;
}

const stopSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
const ourSignalListeners = new Map<(typeof stopSignals)[number], () => void>();

/**
 * Makes celld's stop the only listener of the stop signals. Miniflare's exit hook exits the
 * process on SIGINT and SIGTERM at once, before a graceful stop could run, and adds itself again
 * with each Miniflare started after the last was disposed (a restart); its "exit" hook stays and
 * still stops workerd if we exit abruptly. Ours is added before Miniflare's are removed: with none
 * left for a moment, Node stops watching the signal and starts again, and a signal arriving just
 * then was seen to be lost (celld ran on after a supervisor's SIGTERM). SIGHUP too: a hangup (the
 * terminal it ran in closed) would otherwise end celld at once, as a crash.
 */
function takeSignals(): void {
  for (const [signal, ours] of ourSignalListeners) {
    if (!process.listeners(signal).includes(ours)) process.on(signal, ours);
    for (const listener of process.listeners(signal)) if (listener !== ours) process.removeListener(signal, listener);
  }
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
