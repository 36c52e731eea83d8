import { basename } from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { Miniflare, type WorkerOptions } from "miniflare";
import { bundleWorker, isBundleError, type BundleMessage, type WorkerBundle } from "../bundle/bundle.ts";
import type { Deployment, WorkerConfig } from "../config/index.ts";
import { AbsentWorkers } from "../host/absent-workers.ts";
import { isRuntimeFailure } from "../workerd/runtime-start.ts";
import { workerOptions } from "../host/worker-options.ts";
import { DeployError } from "./deploy-errors.ts";

/**
 * Starts the Workers once in a workerd of their own, with no storage and no socket but
 * Miniflare's loopback one, to learn whether they start at all before they replace the running
 * ones: a syntax error, a module that throws at its top level, an unknown compatibility flag, a
 * named entrypoint its Worker does not export. workerd's own words are the error's message,
 * as Cloudflare's validation answers with the script's "Uncaught Error". Nothing here touches the
 * data directory, so this can run while the deployed Workers serve. Returns the plain bundles it
 * built, by Worker name, so that the start that follows does not build them again.
 */
export async function checkWorkersStart(workers: readonly WorkerConfig[]): Promise<ReadonlyMap<string, WorkerBundle>> {
  const options: WorkerOptions[] = [];
  const bundles = new Map<string, WorkerBundle>();
  // A binding to a Worker not deployed here gets the host's stand-in, as when it runs.
  const deployment: Deployment = { workers: [...workers], queues: [], warnings: [] };
  const absent = new AbsentWorkers(deployment);
  for (const worker of workers) {
    try {
      const bundle = await bundleWorker(worker);
      bundles.set(worker.name, bundle);
      options.push(workerOptions(worker, bundle, () => undefined, absent));
    } catch (error) {
      if (!isBundleError(error)) throw error;
      throw new DeployError("invalid_upload", `Worker "${worker.name}" could not be built: ${error.messages.map(modulePosition).join("; ")}`);
    }
  }
  const standIns = await absent.workerOptions(deployment);
  if (standIns !== undefined) options.push(standIns);
  const said: string[] = [];
  let stderrDone: Promise<void> = Promise.resolve();
  const mf = new Miniflare({
    workers: options,
    cf: false,
    host: "127.0.0.1",
    port: 0,
    handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
      stdout.resume();
      const lines = createInterface({ input: stderr }).on("line", (line) => said.push(line));
      stderrDone = new Promise((resolve) => lines.once("close", resolve));
    },
  });
  try {
    await mf.ready;
  } catch (error) {
    if (!isRuntimeFailure(error)) throw error;
    // workerd has exited; the lines that say why may still be in the pipe.
    await Promise.race([stderrDone, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
    throw new DeployError("invalid_upload", startFailureMessage(said));
  } finally {
    await mf.dispose().catch(() => undefined);
  }
  return bundles;
}

/** `index.js:3:5: Expected "}"`: the module's own name, not where the data directory keeps it. */
function modulePosition(m: BundleMessage): string {
  return m.line === undefined ? `${basename(m.file)}: ${m.text}` : `${basename(m.file)}:${m.line}:${m.column ?? 1}: ${m.text}`;
}

/** workerd's lines about the failure, without its noise (empty lines, stack frames into Miniflare). */
export function startFailureMessage(lines: readonly string[]): string {
  const told = lines
    .map((line) => line.replace(/^workerd\/[^\s]+: /, "").replace(/^service core:user:([^:]+): /, 'Worker "$1": ').trim())
    .filter((line) => line !== "" && !/^at /.test(line));
  const uncaught = told.filter((line) => /Uncaught|SyntaxError|Error:/.test(line));
  const shown = (uncaught.length > 0 ? uncaught : told).slice(0, 6).join("\n");
  return `the Worker could not start: ${shown === "" ? "workerd refused it without saying why" : shown}`;
}
