import type { Readable } from "node:stream";
import type { Clock } from "@celld/queue-cell";
import { Miniflare, type MiniflareOptions } from "miniflare";
import type { HostLog } from "../host/host-log.ts";
import { afterPendingSignals } from "../host/process-signals.ts";
import { RestartPolicy } from "./restart-policy.ts";
import { describeWorkerdExit, lastWorkerdExit, watchWorkerdSpawns } from "./workerd-exit-status.ts";

/** What the host does around a workerd that exited under it, and one started again. */
export interface RuntimeSupervisorHooks {
  /** workerd exited under the host (not stopped by it), before any restart. */
  exited(): void;
  /** Just before each restart. */
  beforeRestart?(): void;
  /** A restarted workerd runs every Worker again. */
  restarted(): void;
  /** workerd exited too often (see RestartPolicy): nothing more is tried. The line is logged. */
  gaveUp(message: string): void;
}

export interface RuntimeSupervisorOptions {
  clock: Clock;
  log: HostLog;
  hooks: RuntimeSupervisorHooks;
  policy?: RestartPolicy;
}

/** Counts for an operator (and /metrics): how often workerd exited under the host, and what followed. */
export interface RuntimeStats {
  /** Exits of workerd the host did not ask for. */
  exits: number;
  /** Restarts after them that brought every Worker back. */
  restarts: number;
  /** Restarts that failed (workerd refused to start, a port was taken): each counts as an exit. */
  failedRestarts: number;
  lastExit: { atMs: number; cause: string } | undefined;
}

type State = "starting" | "running" | "down" | "restarting" | "stopped";

/**
 * Owns the host's Miniflare instance, and so workerd's lifecycle: starts it, applies new options
 * (a restart of workerd with them), and restarts workerd when it exits unexpectedly, with the
 * backoff and the limit of RestartPolicy. workerd's exit is known by its stdout closing (Miniflare
 * hands the host its output streams, and has no exit event of its own); the restart is
 * Miniflare's setOptions with the same options, which starts a new workerd on the same sockets
 * (Miniflare keeps a port picked for port 0). A close of the output that the supervisor itself
 * caused (setOptions, dispose) is not an exit.
 */
export class RuntimeSupervisor {
  readonly stats: RuntimeStats = { exits: 0, restarts: 0, failedRestarts: 0, lastExit: undefined };
  private mf: Miniflare | undefined;
  private options: MiniflareOptions | undefined;
  private state: State = "starting";
  /** Counts workerd starts: a close of an earlier one's output is old news. */
  private generation = 0;
  private closedGeneration = 0;
  private cancelRestart: (() => void) | undefined;
  /** Restarts and setOptions calls, one at a time. */
  private busy: Promise<void> = Promise.resolve();
  private readonly policy: RestartPolicy;

  constructor(private readonly settings: RuntimeSupervisorOptions) {
    this.policy = settings.policy ?? new RestartPolicy();
    watchWorkerdSpawns();
  }

  /** Starts Miniflare (workerd) with `options`; rejects as Miniflare's ready does. */
  async start(options: MiniflareOptions): Promise<Miniflare> {
    if (this.mf !== undefined) throw new Error("RuntimeSupervisor.start() runs once");
    this.options = options;
    const mf = new Miniflare(this.watched(options));
    this.mf = mf;
    await mf.ready;
    if (this.state === "starting") this.state = "running";
    return mf;
  }

  get miniflare(): Miniflare {
    if (this.mf === undefined) throw new Error("RuntimeSupervisor.start() has not run");
    return this.mf;
  }

  /**
   * Restarts workerd with new options (new Worker versions); later restarts use them. If workerd
   * refuses them, this rejects and workerd stays down: the caller decides (setOptions with the
   * options that ran before, or a stop).
   */
  setOptions(options: MiniflareOptions): Promise<void> {
    return this.serial(async () => {
      if (this.state === "stopped") throw new Error("the Workers runtime has stopped");
      this.cancelRestart?.();
      this.state = "restarting";
      this.options = options;
      try {
        await this.miniflare.setOptions(this.watched(options));
      } catch (error) {
        if (this.state === "restarting") this.state = "down";
        throw error;
      }
      this.running();
    });
  }

  /** No more restarts; a pending one is cancelled. workerd's exit from now on is expected. */
  stopSupervising(): void {
    this.state = "stopped";
    this.cancelRestart?.();
  }

  /** Stops supervising, waits for a restart under way, and stops workerd. */
  async dispose(): Promise<void> {
    this.stopSupervising();
    await this.busy.catch(() => undefined);
    await this.mf?.dispose();
  }

  private watched(options: MiniflareOptions): MiniflareOptions {
    const handle = options.handleRuntimeStdio;
    return {
      ...options,
      handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
        const generation = ++this.generation;
        handle?.(stdout, stderr);
        // A Ctrl-C that ended workerd is celld's too: its stop, once begun, makes this no exit.
        stdout.once("close", () => void afterPendingSignals().then(() => this.outputClosed(generation)));
      },
    };
  }

  private outputClosed(generation: number): void {
    this.closedGeneration = Math.max(this.closedGeneration, generation);
    if (generation !== this.generation || this.state !== "running") return;
    this.state = "down";
    void this.exited();
  }

  private async exited(): Promise<void> {
    const cause = `exited unexpectedly (${describeWorkerdExit(await lastWorkerdExit())})`;
    this.stats.exits++;
    this.stats.lastExit = { atMs: this.settings.clock.now(), cause };
    this.settings.hooks.exited();
    this.decide(cause);
  }

  /** After an exit or a failed restart: restart later, or give up. */
  private decide(cause: string): void {
    if (this.state === "stopped") return;
    const { clock, log, hooks } = this.settings;
    const decision = this.policy.exited(clock.now());
    if (!decision.restart) {
      this.stopSupervising();
      const message =
        `workerd (the Workers runtime) ${cause}, its failure ${decision.exitsInWindow} within ${decision.windowMs / 1000} s: ` +
        "celld stops rather than start it again (workerd's lines above may say why; a Worker that crashes it as it " +
        "loads, or a machine out of memory or of file descriptors, are common causes). Messages waiting in queues stay there.";
      log.error(message);
      hooks.gaveUp(message);
      return;
    }
    log.error(
      `workerd (the Workers runtime) ${cause}: starting it again in ${decision.delayMs} ms ` +
        `(failure ${decision.exitsInWindow} within a minute). Until then no Worker runs; messages wait in their queues.`,
    );
    this.cancelRestart?.();
    this.cancelRestart = clock.schedule(clock.now() + decision.delayMs, () => {
      this.cancelRestart = undefined;
      void this.serial(() => this.restart());
    });
  }

  private async restart(): Promise<void> {
    if (this.state !== "down") return;
    this.state = "restarting";
    try {
      this.settings.hooks.beforeRestart?.();
      await this.miniflare.setOptions(this.watched(this.options!));
    } catch (error) {
      if (this.state !== "restarting") return;
      this.state = "down";
      this.stats.failedRestarts++;
      this.settings.log.error("workerd (the Workers runtime) could not be started again", error);
      this.decide("could not be started again");
      return;
    }
    if (this.state !== "restarting") return;
    this.stats.restarts++;
    this.settings.log.info(`workerd (the Workers runtime) started again (restart ${this.stats.restarts}): the Workers serve again`);
    this.settings.hooks.restarted();
    this.running();
  }

  /** The new workerd runs; if its output closed while it started, that is an exit of its own. */
  private running(): void {
    if (this.state !== "restarting") return;
    this.state = "running";
    if (this.closedGeneration === this.generation) this.outputClosed(this.generation);
  }

  private serial(work: () => Promise<void>): Promise<void> {
    const next = this.busy.then(work, work);
    this.busy = next.catch(() => undefined);
    return next;
  }
}
