import type { WorkerOptions } from "miniflare";
import type { WorkerConfig } from "../config/index.ts";

/** Runs a named Worker's handlers from Node: `queue()`, `fetch()`, ... (Miniflare's Fetcher). */
export type WorkerHandle = Awaited<ReturnType<import("miniflare").Miniflare["getWorker"]>>;

export interface PluginStartContext {
  getWorker(name: string): Promise<WorkerHandle>;
}

/**
 * The seam between the host and a Workers product (Queues is the first). The host core knows
 * Workers, bindings and handlers; a plugin adds the bindings its product gives a Worker and the
 * work it does once workerd runs (for Queues: delivering batches to consumers).
 */
export interface HostPlugin {
  readonly name: string;
  /** Miniflare options this plugin adds to one Worker (bindings; merged into the Worker's own). */
  workerOptions(worker: WorkerConfig): Partial<WorkerOptions>;
  /** Called once every Worker runs. */
  start(context: PluginStartContext): Promise<void>;
  /** Stop work; in-flight work gets `graceMs` to finish. */
  stop(graceMs: number): Promise<void>;
}
