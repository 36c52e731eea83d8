import { existsSync, statSync } from "node:fs";
import { dispatchKeyBinding, queueDispatchWorkerEntry } from "@celld/bindings";
import { build } from "esbuild";
import { supportedCompatibilityDate, type WorkerOptions } from "miniflare";
import { reservedWorkerNamePrefix } from "../config/index.ts";
import { installedMiniflareVersion, wiredMiniflareVersion } from "../workerd/miniflare-version.ts";

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

/**
 * The dispatch Worker's socket in the host's socket directory (see SocketDir). The name ends in
 * `:0` because of how Miniflare writes the address: see unixDirectSocket.
 */
export const queueDispatchSocketName = "queue-dispatch:0";

/**
 * Miniflare options for the dispatch Worker, bound to every consumer Worker in `bindings` (through
 * its named entrypoint in `entrypoints`, if any), with
 * its socket at `socketPath` (a Unix socket), or without one (no Unix sockets here) on a free
 * loopback port. It runs only requests that carry `key` (see dispatchKeyHeader in bindings).
 */
export async function queueDispatchWorkerOptions(
  bindings: ReadonlyMap<string, string>,
  key: string,
  socketPath?: string,
  entrypoints: ReadonlyMap<string, string> = new Map(),
): Promise<WorkerOptions> {
  return {
    name: queueDispatchWorkerName,
    modules: true,
    script: await dispatchWorkerBundle(),
    compatibilityDate:
      pinnedCompatibilityDate <= supportedCompatibilityDate ? pinnedCompatibilityDate : supportedCompatibilityDate,
    // Fetcher.queue() on a service binding exists only under this flag (Miniflare's own queue
    // broker sets it too).
    compatibilityFlags: ["service_binding_extra_handlers"],
    // A Worker listed in `entrypoints` is bound through that named entrypoint: Miniflare sends a
    // binding to the default entrypoint of a Worker with [assets] into its asset router, which
    // has no queue() (see queueEntrypointName in handler-error-shim.ts).
    serviceBindings: Object.fromEntries(
      [...bindings].map(([worker, binding]) => {
        const entrypoint = entrypoints.get(worker);
        return [binding, entrypoint === undefined ? worker : { name: worker, entrypoint }];
      }),
    ),
    bindings: { [dispatchKeyBinding]: key },
    // Node reaches it straight through this socket. It runs any consumer's queue() handler with
    // whatever messages a request carries, so only the host may reach it: a Unix socket in a
    // directory only this user can enter, where a loopback port would be open to every local
    // process. The socket also costs less CPU per batch than loopback TCP. Miniflare's entry
    // socket still routes to this Worker by name, hence the key as well.
    unsafeDirectSockets: [socketPath === undefined ? { host: "127.0.0.1", port: 0 } : unixDirectSocket(socketPath)],
  };
}

/**
 * A Miniflare direct socket that workerd opens as a Unix socket at `path`. Miniflare has no
 * option for that: it writes a direct socket's address as `host:port`, and workerd reads an
 * address that starts with `unix:` as a path. So the path ends in `:0`, the port Miniflare
 * appends, and the host is `unix:` and the rest. test/queues-dispatch.test.ts checks that workerd
 * listens where this says, and the host checks it at every start (unixDirectSocketListening).
 */
export function unixDirectSocket(path: string): { host: string; port: number } {
  const port = ":0";
  if (!path.endsWith(port)) throw new Error(`a direct socket's Unix path must end in "${port}", not ${JSON.stringify(path)}`);
  return { host: `unix:${path.slice(0, -port.length)}`, port: 0 };
}

/**
 * `path`, once workerd listens there (after start). The path rests on how Miniflare writes a
 * direct socket's address (unixDirectSocket): if an upgrade changes that, this says so at start,
 * rather than every batch failing to connect.
 */
export function unixDirectSocketListening(path: string): string {
  if (!existsSync(path) || !statSync(path).isSocket()) {
    throw new Error(
      `celld puts the queue dispatch Worker on a Unix socket through how miniflare ${wiredMiniflareVersion} writes a ` +
        `direct socket's address, and with miniflare ${installedMiniflareVersion()} workerd is not listening at ${path}. ` +
        "Re-check unixDirectSocket in packages/runtime/src/queue-transport/queue-dispatch-worker.ts.",
    );
  }
  return path;
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
