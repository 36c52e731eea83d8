import { existsSync } from "node:fs";
import { constants } from "node:os";
import Database from "better-sqlite3";
import { storageCause } from "@celld/queue-cell";
import { ApiKeyStore, startApiServer, type ApiServer } from "../api/index.ts";
import { formatIssue, formatWarnings, isConfigError, loadDeployment, type WorkerConfig } from "../config/index.ts";
import { DataDirUnusableError } from "../host/data-dir-lock.ts";
import { consoleHostLog, watchOutputStreams } from "../host/host-log.ts";
import { startHost, type Host } from "../host/host.ts";
import { checkPortFree } from "../host/port-check.ts";
import type { DevArgs } from "./args.ts";
import { dataDirLine } from "./data-dir-line.ts";
import { exitStatus } from "./exit-status.ts";
import { watchNpmParent } from "./npm-parent-watch.ts";

/** How long in-flight batches may run on shutdown before they are handed back to their queues. */
const shutdownGraceMs = 10_000;
/** A queue nobody has used for this long gives back its file handle and memory until next use. */
const cellIdleCloseMs = 5 * 60_000;

/** `celld dev`: validates the whole deployment, starts it, and stops cleanly on SIGINT, SIGTERM or SIGHUP. */
export async function dev(args: DevArgs): Promise<number> {
  const log = consoleHostLog;
  // Set once the shutdown below exists; until then a closed output is remembered and acted on then.
  let outputClosed: string | undefined;
  let stopForOutput = (): void => {};
  watchOutputStreams((stream, code) => {
    outputClosed = `${stream} was closed (${code})`;
    stopForOutput();
  });
  for (const warning of args.warnings) log.warn(warning);
  let deployment;
  try {
    deployment = loadDeployment(args.configs, { environment: args.environment });
  } catch (error) {
    if (!isConfigError(error)) throw error;
    for (const line of formatWarnings(error.warnings)) log.warn(line);
    console.error(`celld: the deployment has ${error.issues.length} error(s); nothing was started:`);
    for (const issue of error.issues) console.error(`  ${formatIssue(issue)}`);
    return exitStatus.config;
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

  // Before anything starts, as the Workers' port is: once workerd runs, a taken API port could
  // only fail as a stack trace.
  if (args.apiPort !== undefined) await checkPortFree(args.host, args.apiPort, "--api-port");

  // Set once the shutdown below exists; workerd cannot exit unexpectedly before startHost returns.
  let runtimeExited = (): void => {};
  let host: Host;
  try {
    host = await startHost({
      deployment,
      dataDir: args.dataDir,
      port: args.port,
      host: args.host,
      log,
      cellIdleCloseMs,
      triggerHandlers: args.testScheduled,
      onRuntimeExit: () => runtimeExited(),
    });
  } catch (error) {
    // A data directory that cannot be written (a full disk) is the operator's to fix: the line
    // names the directory and the cause, and a stack would add nothing.
    if (!(error instanceof DataDirUnusableError)) throw error;
    console.error(`celld: ${error.message}`);
    return exitStatus.failed;
  }
  let api: ApiServer | undefined;
  let apiKeys: ApiKeyStore | undefined;
  if (args.apiPort !== undefined) {
    try {
      apiKeys = ApiKeyStore.open(args.dataDir);
      const queues = deployment.queues;
      api = await startApiServer({
        registry: host.registry,
        keys: apiKeys,
        dataDir: args.dataDir,
        port: args.apiPort,
        host: args.host,
        workerQueues: { declared: () => queues },
        onInternalError: (error) => log.error("the queues API failed a request", error),
        onStorageFailure: (line) => log.error(`the queues API refused calls: ${line}`),
      });
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
  const stopped = new Promise<number>((resolve) => {
    let stopping = false;
    // What a stop waits for: the batches, and the cron runs of a deployment that has crons.
    const hasCrons = deployment.workers.some((w) => w.crons.length > 0);
    const inFlight = hasCrons ? "batches and cron runs" : "batches";
    const cutOff = hasCrons ? "; cron runs still going are cut off, not run again" : "";
    /**
     * `exitCode`: 0 for a signal, 1 when celld stops on its own (workerd went away, its output was
     * closed), so that a supervisor's Restart=on-failure starts it again.
     */
    const stop = (reason: string, exitCode: number = exitStatus.ok): void => {
      if (stopping) {
        log.warn(`${reason} again: exiting at once; messages in running batches return to their queues at the next start${cutOff}`);
        // As a shell reports a process a signal ended: 128 + its number (130 SIGINT, 143 SIGTERM).
        process.exit(128 + (constants.signals[reason as NodeJS.Signals] ?? 0));
      }
      stopping = true;
      log.info(`${reason}: stopping (in-flight ${inFlight} get ${shutdownGraceMs / 1000} s to finish)...`);
      const closeAll = async (): Promise<void> => {
        // Closing the host hands running batches back and closes the cells: a failed API close
        // must not skip it.
        try {
          await api?.close();
          apiKeys?.close();
        } finally {
          await host.close(shutdownGraceMs);
        }
      };
      closeAll().then(
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
      if (!stopping) stop("workerd exited", exitStatus.failed);
    };
    stopForOutput = () => {
      if (!stopping && outputClosed !== undefined) stop(outputClosed, exitStatus.failed);
    };
    stopForOutput();
    // Miniflare's exit hook exits the process on these signals at once, before a graceful stop
    // could run; its "exit" hook stays and still stops workerd if we exit abruptly. Our listener
    // is added before Miniflare's are removed: with none left for a moment, Node stops watching
    // the signal and starts again, and a signal arriving just then was seen to be lost (celld ran
    // on after a supervisor's SIGTERM).
    // SIGHUP too: celld has nothing to reload, and a hangup (the terminal it ran in closed) would
    // otherwise end it at once, as a crash.
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
      const others = process.listeners(signal);
      process.on(signal, () => stop(signal));
      for (const listener of others) process.removeListener(signal, listener);
    }
    watchNpmParent(() => {
      if (!stopping) stop("the npm script that started celld has ended");
    });
  });
  // Only once the signals are ours: a supervisor may signal as soon as it reads this.
  const first = deployment.workers[0]!;
  log.info(`Worker "${first.name}" listening on ${host.url.href}`);
  if (args.testScheduled) {
    log.info(`its scheduled() handler runs at ${host.url.href}cdn-cgi/handler/scheduled?cron=*+*+*+*+* (--test-scheduled)`);
  }
  if (api !== undefined) log.info(`queues API listening on ${api.url}/v1 (keys: celld keys create ...)`);
  const usage = host.registry.diskUsage();
  const configured = deployment.queues.filter((queue) => existsSync(host.registry.pathOf(queue))).length;
  log.info(dataDirLine(args.dataDir, usage, Math.max(0, usage.queues - configured)));
  if (deployment.queues.length > 0) log.info(queuesLine(deployment.queues, host.unopenedQueues));
  return stopped;
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
