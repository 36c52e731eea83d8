import { queueDispatchWorkerEntry } from "@celld/bindings";
import { build } from "esbuild";
import { supportedCompatibilityDate, type WorkerOptions } from "miniflare";
import { reservedWorkerNamePrefix } from "../config/index.ts";

/** The internal Worker that runs consumer batches (see queue-dispatch.worker.ts in bindings). */
export const queueDispatchWorkerName = `${reservedWorkerNamePrefix}queue_dispatch`;

// Pinned so the internal Worker behaves the same across deployments; workerd refuses a date newer
// than itself, hence the clip.
const pinnedCompatibilityDate = "2026-04-01";

/**
 * The dispatch Worker's service binding to each consumer Worker, by Worker name. The Worker's env
 * holds these bindings and nothing else, so numbered names cannot clash with anything.
 */
export function consumerBindings(consumerWorkers: readonly string[]): Map<string, string> {
  return new Map(consumerWorkers.map((worker, i) => [worker, `CONSUMER_${i}`]));
}

/** Miniflare options for the dispatch Worker, bound to every consumer Worker in `bindings`. */
export async function queueDispatchWorkerOptions(bindings: ReadonlyMap<string, string>): Promise<WorkerOptions> {
  return {
    name: queueDispatchWorkerName,
    modules: true,
    script: await dispatchWorkerBundle(),
    compatibilityDate:
      pinnedCompatibilityDate <= supportedCompatibilityDate ? pinnedCompatibilityDate : supportedCompatibilityDate,
    // Fetcher.queue() on a service binding exists only under this flag (Miniflare's own queue
    // broker sets it too).
    compatibilityFlags: ["service_binding_extra_handlers"],
    serviceBindings: Object.fromEntries([...bindings].map(([worker, binding]) => [binding, worker])),
    // Node reaches it straight through this socket, on loopback only: it runs any consumer's
    // queue() handler on request, so it must not answer where the user's Workers do.
    unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
  };
}

// The source does not change while the process runs; every host in it shares one bundle.
let bundle: Promise<string> | undefined;

function dispatchWorkerBundle(): Promise<string> {
  bundle ??= build({
    entryPoints: [queueDispatchWorkerEntry],
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    logLevel: "silent",
  }).then((result) => {
    const [output] = result.outputFiles;
    if (output === undefined) throw new Error(`esbuild returned no output for ${queueDispatchWorkerEntry}`);
    return output.text;
  });
  // A failed build (a broken checkout) is not cached: the next host tries again.
  bundle.catch(() => (bundle = undefined));
  return bundle;
}
