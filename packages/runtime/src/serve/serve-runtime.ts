import type { CellRegistry } from "@celld/queue-cell";
import type { WorkerConfig } from "../config/index.ts";
import { queuesOf } from "../config/model.ts";
import { DeployError } from "../deploy/deploy-errors.ts";
import type { WorkersRuntime } from "../deploy/deploy-service.ts";
import { checkWorkersStart } from "../deploy/start-check.ts";
import type { Front } from "../front/front-server.ts";
import { WorkerRouter } from "../front/worker-router.ts";
import type { HostLog } from "../host/host-log.ts";
import { startHost, type Host } from "../host/host.ts";

export interface ServeRuntimeOptions {
  dataDir: string;
  /** Held by `celld serve` for its whole life, across every start of the Workers. */
  registry: CellRegistry;
  /** `--port`, which outlives every start of the Workers. */
  front: Pick<Front, "setRouter" | "setUpstreams">;
  log: HostLog;
  /** How long in-flight batches of the Workers being replaced may run before they are handed back. */
  graceMs: number;
  cellIdleCloseMs?: number;
  /** Told after each run, whatever its outcome (each start of workerd adds Miniflare's signal listeners). */
  afterRun?: () => void;
}

/**
 * The Workers `celld serve` runs, replaced whole at each deploy. The front door on `--port` and
 * the cells stay; what changes is workerd and the Workers in it. A replacement is checked first in
 * a workerd of its own with no storage (start-check.ts): a Worker that cannot start is refused
 * while the running ones serve on. Then the running Workers are stopped (requests in flight end,
 * batches get their grace) and the new ones started on the same storage: two workerd processes
 * never have KV, D1, R2 or Durable Object files open at once. The cost is a gap in which --port
 * answers 503 with Retry-After (docs/design-notes.md, "celld serve: the swap").
 */
export class ServeRuntime implements WorkersRuntime {
  private host: Host | undefined;
  private running: WorkerConfig[] = [];

  constructor(private readonly options: ServeRuntimeOptions) {}

  get workers(): readonly WorkerConfig[] {
    return this.running;
  }

  async run(workers: WorkerConfig[]): Promise<void> {
    try {
      await this.replace(workers);
    } finally {
      this.options.afterRun?.();
    }
  }

  async check(workers: WorkerConfig[]): Promise<void> {
    try {
      await checkWorkersStart(workers);
    } finally {
      this.options.afterRun?.();
    }
  }

  private async replace(workers: WorkerConfig[]): Promise<void> {
    if (workers.length > 0) await checkWorkersStart(workers);
    const previous = this.running;
    await this.stop();
    try {
      await this.start(workers);
    } catch (error) {
      this.options.log.error(`the deployed Workers could not start (${(error as Error).message}); starting those that ran before`);
      await this.start(previous).catch((again: unknown) => {
        this.options.log.error("the Workers that ran before could not start again either: no Worker runs until the next deploy", again);
      });
      throw new DeployError("invalid_upload", `the Worker could not start: ${(error as Error).message}`, { cause: error });
    }
  }

  /** Stops the Workers; the front answers 503 until the next run. */
  async stop(): Promise<void> {
    this.options.front.setUpstreams(new Map());
    const host = this.host;
    this.host = undefined;
    this.running = [];
    await host?.close(this.options.graceMs);
  }

  private async start(workers: WorkerConfig[]): Promise<void> {
    const { front } = this.options;
    if (workers.length === 0) {
      front.setRouter(undefined);
      return;
    }
    const host = await startHost({
      deployment: { workers, queues: queuesOf(workers), warnings: [] },
      dataDir: this.options.dataDir,
      registry: this.options.registry,
      host: "127.0.0.1",
      port: 0,
      log: this.options.log,
      cellIdleCloseMs: this.options.cellIdleCloseMs,
    });
    this.host = host;
    this.running = workers;
    front.setRouter(new WorkerRouter({ workers: workers.map((w) => ({ name: w.name, routes: [] })) }));
    // Only the first Worker has a socket of its own in workerd today; the others are reached
    // through service bindings (what is left: docs/deploying.md).
    front.setUpstreams(new Map([[workers[0]!.name, { host: host.url.hostname, port: Number(host.url.port) }]]));
  }
}
