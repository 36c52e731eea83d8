import { limits, type Clock } from "@celld/queue-cell";
import type { Deployment } from "../config/index.ts";
import type { HostLog } from "../host/host-log.ts";
import type { HostPlugin, PluginStartContext, ScheduledRunResult } from "./host-plugin.ts";
import { parseCron, type CronSchedule } from "../config/cron/cron-expression.ts";

export interface CronTriggersOptions {
  deployment: Deployment;
  clock: Clock;
  log: HostLog;
}

interface Trigger {
  worker: string;
  schedule: CronSchedule;
  cancel: (() => void) | undefined;
}

/**
 * Cron Triggers: each Worker's `triggers.crons`, run as on Cloudflare. At every minute (UTC) an
 * expression matches, the Worker's scheduled() handler runs in workerd with that minute as
 * `controller.scheduledTime` and the expression as written as `controller.cron`.
 *
 * A due time passed while celld was stopped, or while its clock was held, is not made up for,
 * as on Cloudflare; a run still going when the next is due does not hold it back. A failed run is
 * not run again (Cloudflare may retry one; `controller.noRetry()` changes nothing here). What a
 * handler throws is printed by the handler shim, like a fetch()'s; other ends (exceededCpu,
 * workerd unable to run it) are told here, and so is a run past Cloudflare's 15 minutes, which
 * workerd would let run on: celld then stops waiting for it, so a stop does not wait for it either.
 */
export class CronTriggersPlugin implements HostPlugin {
  readonly name = "cron-triggers";
  private readonly triggers: Trigger[] = [];
  /** Runs not yet ended, each with the cancel of its watch for the 15 minutes. */
  private readonly running = new Map<Promise<void>, () => void>();
  private context: PluginStartContext | undefined;
  private stopped = false;

  constructor(private readonly options: CronTriggersOptions) {
    for (const worker of options.deployment.workers) {
      // The config has parsed every expression already: one that fails here is a bug, and thrown.
      for (const cron of worker.crons) this.triggers.push({ worker: worker.name, schedule: parseCron(cron), cancel: undefined });
    }
  }

  async prepare(): Promise<void> {}

  workerOptions(): Record<string, never> {
    return {};
  }

  async extraWorkers(): Promise<[]> {
    return [];
  }

  async start(context: PluginStartContext): Promise<void> {
    this.context = context;
    const now = this.options.clock.now();
    for (const trigger of this.triggers) {
      const next = trigger.schedule.nextAfter(now);
      this.options.log.info(
        `cron "${trigger.schedule.expression}" -> Worker "${trigger.worker}" (` +
          (next === undefined ? "no time matches it in the next 28 years" : `next at ${utcMinute(next)}`) +
          ")",
      );
      this.arm(trigger, now);
    }
  }

  async stop(graceMs: number): Promise<void> {
    this.halt();
    if (this.running.size === 0) return;
    // A run that outlasts the grace is cut off by workerd's own stop, right after this.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(this.running.keys()),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(timer);
  }

  async dispose(): Promise<void> {}

  runtimeExited(): void {
    this.halt();
  }

  /** No more runs, and no timer left: the crons' next times and the running ones' watches. */
  private halt(): void {
    this.stopped = true;
    for (const trigger of this.triggers) trigger.cancel?.();
    for (const unwatch of this.running.values()) unwatch();
  }

  private arm(trigger: Trigger, afterMs: number): void {
    const due = trigger.schedule.nextAfter(afterMs);
    if (due === undefined || this.stopped) return;
    trigger.cancel = this.options.clock.schedule(due, () => this.fire(trigger, due));
  }

  private fire(trigger: Trigger, due: number): void {
    trigger.cancel = undefined;
    const context = this.context;
    if (this.stopped || context === undefined) return;
    // From the later of the two: a timer that fired late (the event loop held) skips the times
    // it missed rather than running them all at once.
    this.arm(trigger, Math.max(due, this.options.clock.now()));
    const run = context
      .runScheduled(trigger.worker, { cron: trigger.schedule.expression, scheduledTime: due })
      .then(
        (result) => this.ended(trigger, due, result),
        (error: unknown) => {
          // Cut off by the host's stop or by workerd's exit, both told of already.
          if (this.stopped) return;
          this.options.log.error(
            `cron "${trigger.schedule.expression}" of Worker "${trigger.worker}" at ${utcMinute(due)}: ` +
              "workerd could not run its scheduled() handler",
            error,
          );
        },
      )
      .finally(() => {
        this.running.get(run)?.();
        this.running.delete(run);
      });
    const unwatch = this.options.clock.schedule(due + limits.scheduledWallTimeSeconds * 1000, () => {
      if (!this.running.delete(run) || this.stopped) return;
      this.options.log.warn(
        `cron "${trigger.schedule.expression}" of Worker "${trigger.worker}" at ${utcMinute(due)}: the scheduled() ` +
          `handler has run for ${limits.scheduledWallTimeSeconds / 60} minutes, Cloudflare's limit for a cron run; ` +
          "celld no longer waits for it (it runs on until it ends, or until celld stops)",
      );
    });
    this.running.set(run, unwatch);
  }

  private ended(trigger: Trigger, due: number, result: ScheduledRunResult): void {
    // A thrown error has been printed by the handler shim, with its stack.
    if (result.outcome === "ok" || result.outcome === "exception") return;
    this.options.log.warn(
      `cron "${trigger.schedule.expression}" of Worker "${trigger.worker}" at ${utcMinute(due)}: ` +
        `the scheduled() handler ended with outcome ${result.outcome}`,
    );
  }
}

function utcMinute(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16)}Z`;
}
