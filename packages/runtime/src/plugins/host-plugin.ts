import type { WorkerOptions } from "miniflare";
import type { WorkerConfig } from "../config/index.ts";

export interface PluginStartContext {
  /**
   * Where Node reaches a Worker's direct socket (Miniflare's `unsafeDirectSockets`), for Workers
   * a plugin added with one.
   */
  directUrl(workerName: string): Promise<URL>;
  /** Runs a Worker's scheduled() handler in workerd, as a Cron Trigger does; its outcome as workerd reports it. */
  runScheduled(workerName: string, event: { cron: string; scheduledTime: number }): Promise<ScheduledRunResult>;
}

/** workerd's report of one scheduled() run: `outcome` is "ok", "exception", "exceededCpu", ... */
export interface ScheduledRunResult {
  outcome: string;
}

/**
 * The seam between the host and a Workers product (Queues is the first). The host core knows
 * Workers, bindings and handlers; a plugin adds the bindings its product gives a Worker, Workers
 * of its own, and the work it does once workerd runs (for Queues: delivering batches to consumers).
 */
export interface HostPlugin {
  readonly name: string;
  /** Before workerd starts: state and servers the plugin's Worker options point at. */
  prepare(): Promise<void>;
  /** Miniflare options this plugin adds to one Worker (bindings; merged into the Worker's own). */
  workerOptions(worker: WorkerConfig): Partial<WorkerOptions>;
  /** Internal Workers this plugin runs in the same workerd, after the deployment's own. */
  extraWorkers(): Promise<WorkerOptions[]>;
  /** Called once every Worker runs. */
  start(context: PluginStartContext): Promise<void>;
  /** Releases what the plugin holds for workerd (servers it calls), once workerd has stopped. */
  dispose(): Promise<void>;
  /** Stop work; in-flight work gets `graceMs` to finish. */
  stop(graceMs: number): Promise<void>;
  /** workerd exited while the host ran (told before any restart, the host's onRuntimeExit and stop). */
  runtimeExited?(): void;
  /** The host started workerd again after it exited: every Worker runs again, on the same sockets. */
  runtimeRestarted?(): void;
}
