import type { ConsumerKind } from "@celld/bindings";
import type { WorkerOptions } from "miniflare";
import { bundleWorker, type WorkerBundle } from "../bundle/bundle.ts";
import type { Deployment, WorkerConfig } from "../config/index.ts";
import type { HostPlugin } from "../plugins/host-plugin.ts";
import { handlerErrorShim, handlerUses, noDefaultExportWarning, noListenerWarning, queueEntrypointName } from "../worker-code/handler-error-shim.ts";
import type { QueueErrorMarks } from "../worker-code/queue-error-record.ts";
import { addsListener } from "../worker-code/service-worker-listeners.ts";
import { withServiceWorkerShim } from "../worker-code/service-worker-shim.ts";
import type { BundledWorker } from "../workerd/stack-positions.ts";
import { AbsentWorkers } from "./absent-workers.ts";
import { workerOptions } from "./worker-options.ts";

/** What the host learns of its Workers while bundling them, read by the queues plugin later. */
export interface WorkerFacts {
  /** A service-worker script's consumer is named as its "queue" event listener. */
  readonly consumerKinds: Map<string, ConsumerKind>;
  /** Workers with [assets] whose shim exports queueEntrypointName: their batches go through it. */
  readonly queueEntrypoints: Map<string, string>;
  /** Workers whose default entrypoint is their asset router, which drops batches (no queue entrypoint). */
  readonly assetRouted: Set<string>;
  /** Each Worker's queue-error token (QueueErrorMarks.issue). */
  readonly errorTokens: Map<string, string>;
}

/** The deployment's Workers as Miniflare options, in the deployment's order, with what was bundled. */
export interface WorkerSet {
  readonly workers: WorkerOptions[];
  readonly bundled: BundledWorker[];
  /** The files the Workers were bundled from. */
  readonly sources: string[];
  readonly serviceWorkerScripts: boolean;
}

export interface WorkerSetInput {
  deployment: Deployment;
  plugins: readonly HostPlugin[];
  marks: QueueErrorMarks;
  facts: WorkerFacts;
  warn: (message: string) => void;
  /** Plain bundles already built, by Worker name. */
  bundles: ReadonlyMap<string, WorkerBundle> | undefined;
  /** Mark each Worker for Miniflare's inspector proxy. */
  inspector: boolean;
}

/**
 * Bundles each Worker (with its shim) and merges its own options with what each plugin adds; then
 * the stand-ins for Workers the deployment binds to but does not contain (absent-workers.ts).
 */
export async function buildWorkerSet(input: WorkerSetInput): Promise<WorkerSet> {
  const workers: WorkerOptions[] = [];
  const bundled: BundledWorker[] = [];
  const sources = new Set<string>();
  let serviceWorkerScripts = false;
  const absent = new AbsentWorkers(input.deployment);
  for (const worker of input.deployment.workers) {
    const bundle = await bundleFor(worker, input.marks, input.warn, input.bundles?.get(worker.name), input.facts);
    bundled.push({ name: worker.name, main: worker.main, bundle });
    for (const file of bundle.inputs) sources.add(file);
    if (!bundle.modules) {
      serviceWorkerScripts = true;
      input.facts.consumerKinds.set(worker.name, "service-worker");
    }
    const served = servedAssets(worker, bundle, input.warn);
    if (served.assets !== undefined) {
      if (bundle.exports.includes(queueEntrypointName)) input.facts.queueEntrypoints.set(worker.name, queueEntrypointName);
      else input.facts.assetRouted.add(worker.name);
    }
    const own = workerOptions(served, bundle, input.warn, absent);
    // Miniflare's inspector proxy shows the Workers marked so, and keeps celld's own out of it.
    if (input.inspector) own.unsafeInspectorProxy = true;
    for (const plugin of input.plugins) {
      const extra = plugin.workerOptions(worker);
      Object.assign(own, extra, {
        serviceBindings: { ...own.serviceBindings, ...extra.serviceBindings },
      });
    }
    workers.push(own);
  }
  // After the deployment's own: the first Worker stays first.
  const standIns = await absent.workerOptions(input.deployment);
  if (standIns !== undefined) workers.push(standIns);
  return { workers, bundled, sources: [...sources], serviceWorkerScripts };
}

/**
 * A consumer's batches bypass its asset router through the named entrypoint its shim exports
 * (queueEntrypointName). A service-worker script has no named exports, so its batches would go
 * into the router, which has no queue(): such a Worker runs without its assets, and says so.
 */
function servedAssets(worker: WorkerConfig, bundle: WorkerBundle, warn: (message: string) => void): WorkerConfig {
  if (worker.assets === undefined || !worker.consumers.some((c) => c.type === "worker") || bundle.modules) return worker;
  const loses = worker.assets.binding === undefined ? "" : ` (and env.${worker.assets.binding} is undefined)`;
  warn(
    `${worker.configPath}: assets: are not served${loses}: Worker "${worker.name}" consumes queues and is a ` +
      "service-worker script (addEventListener), whose queue() calls Miniflare would send into its asset router, " +
      "which drops them; written as an ES module (export default) it gets both",
  );
  return { ...worker, assets: undefined };
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
  facts: WorkerFacts,
): Promise<WorkerBundle> {
  const plain = built ?? (await bundleWorker(worker));
  const queues = worker.consumers.filter((c) => c.type === "worker").map((c) => c.queue);
  const consumer = { worker: worker.name, queues, token: marks.issue(queues) };
  facts.errorTokens.set(worker.name, consumer.token);
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
