import type { ConfigWarning } from "./issues.ts";
import type { WorkerConfig } from "./model.ts";

/**
 * Which Workers' `[assets]` the pinned Miniflare (4.20260426) can serve. It keeps one asset store
 * per workerd, so only one Worker of a deployment gets its files: the first, in the order of the
 * files. And it routes every service binding to a Worker with assets through its asset router,
 * which has no queue() handler, so a consumer Worker's batches would all fail. Those Workers run
 * without their assets, and each is named with what it loses, rather than refused: the same config
 * ran before celld served assets at all.
 */
export function assetsNotServed(workers: readonly { file: string; worker: WorkerConfig }[]): Map<WorkerConfig, ConfigWarning> {
  const notServed = new Map<WorkerConfig, ConfigWarning>();
  let servedBy: string | undefined;
  for (const { file, worker } of workers) {
    if (worker.assets === undefined) continue;
    const loses = worker.assets.binding === undefined ? "" : ` (and env.${worker.assets.binding} is undefined)`;
    let why: string | undefined;
    if (worker.consumers.length > 0) {
      why =
        "this Worker consumes queues, and Miniflare sends every call into a Worker with assets through its asset " +
        "router, which drops queue(): every batch would fail";
    } else if (servedBy !== undefined) {
      why = `Miniflare serves the assets of one Worker per deployment, and ${servedBy} has them`;
    }
    if (why === undefined) servedBy = `Worker "${worker.name}" (${file})`;
    else notServed.set(worker, { file, path: "assets", message: `are not served${loses}: ${why}` });
  }
  return notServed;
}
