import { randomBytes } from "node:crypto";
import { join } from "node:path";
import {
  ConsumerDispatcher,
  InFlightBudget,
  nodeProducerHandler,
  type BatchReport,
  type SendStages,
  type ConsumerFailureLog,
  type ConsumerKind,
  type ConsumerSettings,
} from "@celld/bindings";
import { isCellError, limits, type QueueCells, type Clock, type QueueConfig, type StorageFailure } from "@celld/queue-cell";
import type { WorkerOptions } from "miniflare";
import type { Deployment, WorkerConfig } from "../config/index.ts";
import { queueProducerWorkerOptions } from "../queue-transport/miniflare-queue-wiring.ts";
import { ProducerServer } from "../queue-transport/producer-server.ts";
import { SocketDir } from "../queue-transport/socket-dir.ts";
import { StorageFailureLog } from "./storage-failure-log.ts";
import { unopenedFileReason } from "../host/data-dir-lock.ts";
import type { HostLog } from "../host/host-log.ts";
import type { HostPlugin, PluginStartContext } from "./host-plugin.ts";
import { QueueDispatchClient } from "../queue-transport/queue-dispatch-client.ts";
import {
  consumerBindings,
  queueDispatchSocketName,
  queueDispatchWorkerName,
  queueDispatchWorkerOptions,
  unixDirectSocketListening,
} from "../queue-transport/queue-dispatch-worker.ts";
import type { ConsumerLoad } from "../metrics/queue-gauges.ts";
import { AddedConsumerRuns, type StartedConsumer } from "./added-consumer-runs.ts";
import type { AddedConsumer, AddedConsumers } from "./added-consumers.ts";

export interface QueuesPluginOptions {
  deployment: Deployment;
  registry: QueueCells;
  clock: Clock;
  log: HostLog;
  /** A consumer invocation's wall-time limit; Cloudflare's 15 minutes unless a test says less. */
  wallTimeSeconds?: number;
  /** Body bytes every consumer's unsettled batches may hold together (see InFlightBudget). */
  batchBytesInFlightMax?: number;
  /** The host's data directory (locked by it): the producer and dispatch sockets go in its `run/`. */
  dataDir?: string;
  onBatch?: (report: BatchReport) => void;
  /** See HostOptions.onSendStages. */
  onSendStages?: (stages: SendStages) => void;
  /** Where failed batches are told of, shared with the handler shim's reports (see host.ts). */
  failures?: ConsumerFailureLog;
  /** How a consumer Worker is written, known once it is bundled; a module unless said. */
  consumerKindOf?: (worker: string) => ConsumerKind;
  /**
   * The named entrypoint its batches go through, known once it is bundled; unset: its default
   * export (see queueDispatchWorkerOptions).
   */
  queueEntrypointOf?: (worker: string) => string | undefined;
  /**
   * The consumers added through the API (AddedConsumers): their policies go on the cells of the
   * deployment's queues that the config gives no consumer, and their Worker consumers run here.
   */
  added?: AddedConsumers;
  /** Why a Worker cannot take batches of a consumer added through the API, if it cannot. */
  cannotConsume?: (worker: string) => string | undefined;
  /** Lets a Worker's handler errors for `queue` (a consumer added through the API) count as its own. */
  allowQueueErrors?: (worker: string, queue: string) => void;
  /** How long a consumer removed through the API may run its batches in flight. */
  removedGraceMs?: number;
}

/** What the host's consumers record on their leases (LeaseOptions.owner); the native API's are 0. */
const hostLeaseOwner = 1;

/**
 * Cloudflare Queues for the host: producer bindings reach cells through workerd's own queue
 * binding, and one dispatcher per consumer turns leases into queue() calls, which the queue
 * dispatch Worker runs inside workerd.
 */
export class QueuesPlugin implements HostPlugin {
  readonly name = "queues";
  private readonly dispatchers: ConsumerDispatcher[] = [];
  /** Releases of the consumers' holds on their cells (QueueCells.hold). */
  private readonly holds: Array<() => void> = [];
  /**
   * The dispatch Worker's binding to each Worker, by Worker name: every Worker, not only the
   * config's consumers, so a consumer added through the API later needs no new binding (bindings
   * are fixed when workerd starts).
   */
  private readonly bindings: Map<string, string>;
  /** The consumers added through the API that run on this host, once start() has run. */
  private addedRuns: AddedConsumerRuns | undefined;
  private detachAdded: (() => void) | undefined;
  private client: QueueDispatchClient | undefined;
  private producerServer: ProducerServer | undefined;
  /** Where the dispatch Worker's Unix socket goes; undefined: it listens on loopback TCP. */
  private dispatchSocketDir: SocketDir | undefined;
  /** Storage failures behind Workers' refused sends, told to the operator once a minute per queue and cause. */
  private readonly producerStorageLog: StorageFailureLog;
  /** One budget for all consumers, the config's and the API's: they share this host's memory. */
  private readonly budget: InFlightBudget;
  /** What the host's requests to the dispatch Worker carry; any other caller is refused. */
  private readonly dispatchKey = randomBytes(32).toString("hex");
  /** Queues whose file prepare() found damaged, of a newer format or another queue's: no consumer runs for them. */
  private readonly unopened = new Set<string>();

  constructor(private readonly options: QueuesPluginOptions) {
    this.bindings = consumerBindings(options.deployment.workers.map((w) => w.name));
    this.budget = new InFlightBudget(options.batchBytesInFlightMax ?? limits.consumerBatchBytesInFlightMax);
    this.producerStorageLog = new StorageFailureLog(options.clock, (line) =>
      options.log.error(`a Worker's send was refused: ${line}`),
    );
  }

  /**
   * Before anything runs: applies each queue's consumer settings to its cell, starts the server
   * producer bindings send to (workerd is given its address), and picks the dispatch Worker's
   * socket.
   */
  async prepare(): Promise<void> {
    const { deployment, registry } = this.options;
    const socketDir = this.options.dataDir === undefined ? undefined : join(this.options.dataDir, "run");
    if (deployment.workers.some((w) => w.producers.length > 0)) {
      this.producerServer ??= await ProducerServer.start({ socketDir });
    }
    if (this.bindings.size > 0) this.dispatchSocketDir ??= SocketDir.open([queueDispatchSocketName], socketDir);
    const consumers = new Map(deployment.workers.flatMap((w) => w.consumers.map((c) => [c.queue, c] as const)));
    const added = new Map((this.options.added?.current ?? []).map((c) => [c.cell, c] as const));
    for (const queue of deployment.queues) {
      const consumer = consumers.get(queue);
      // The config's consumer owns its queue's policy; a queue the config gives none keeps the
      // policy of a consumer added through the API (docs/cloudflare-api.md#consumers).
      const config: Partial<QueueConfig> =
        consumer === undefined
          ? // No consumer: messages wait for one (or for the native API) and go to the queue's
            // own dead-letter set if a lease keeps failing.
            (added.get(queue)?.policy ?? { deadLetter: { kind: "set" } })
          : {
              maxDeliveries: consumer.maxRetries + 1,
              // A pull consumer's lease length, in the cell's whole seconds (rounded up).
              ...(consumer.visibilityTimeoutMs === undefined ? {} : { visibilityTimeoutSeconds: Math.ceil(consumer.visibilityTimeoutMs / 1000) }),
              deadLetter:
                consumer.deadLetterQueue === undefined
                  ? { kind: "delete" }
                  : { kind: "queue", queue: consumer.deadLetterQueue },
            };
      try {
        await registry.open(queue, config);
      } catch (error) {
        const storage = fileOfItsOwn(error);
        if (storage === undefined) throw error;
        // One queue's file is the matter, not the directory: the other queues and every Worker
        // run, rather than none until that file is dealt with.
        this.unopened.add(queue);
        this.options.log.error(
          `queue "${queue}" could not be opened, so its sends are refused and its consumer does not run until celld is ` +
            `started again with the file dealt with: ${unopenedFileReason(storage)}`,
        );
      }
    }
  }

  /** The deployment's queues prepare() left unopened, each told in an error line. */
  get unopenedQueues(): string[] {
    return [...this.unopened];
  }

  workerOptions(worker: WorkerConfig): Partial<WorkerOptions> {
    const { registry } = this.options;
    if (worker.producers.length === 0) return {};
    if (this.producerServer === undefined) throw new Error("QueuesPlugin.prepare() must run before workerOptions()");
    const wiring = queueProducerWorkerOptions(
      worker.producers,
      (producer) =>
        nodeProducerHandler({
          queue: producer.queue,
          deliveryDelaySeconds: producer.deliveryDelaySeconds,
          getCell: () => registry.open(producer.queue),
          onStorageFailure: (error) => this.producerStorageLog.report(error),
          ...(this.options.onSendStages === undefined ? {} : { onSendStages: this.options.onSendStages }),
        }),
      this.producerServer,
      Object.fromEntries(worker.services.map((s) => [s.binding, s.service])),
    );
    return { queueProducers: wiring.queueProducers, serviceBindings: wiring.serviceBindings };
  }

  async extraWorkers(): Promise<WorkerOptions[]> {
    if (this.bindings.size === 0) return [];
    const entrypoints = new Map<string, string>();
    for (const worker of this.bindings.keys()) {
      const entrypoint = this.options.queueEntrypointOf?.(worker);
      if (entrypoint !== undefined) entrypoints.set(worker, entrypoint);
    }
    const socket = this.dispatchSocketDir?.socketPath(queueDispatchSocketName);
    return [await queueDispatchWorkerOptions(this.bindings, this.dispatchKey, socket, entrypoints)];
  }

  async start(context: PluginStartContext): Promise<void> {
    const { deployment, log } = this.options;
    if (this.bindings.size === 0) return;
    this.client = new QueueDispatchClient(
      this.dispatchSocketDir === undefined
        ? await context.directUrl(queueDispatchWorkerName)
        : { socketPath: unixDirectSocketListening(this.dispatchSocketDir.socketPath(queueDispatchSocketName)) },
      this.dispatchKey,
    );
    const ready: Array<{ dispatcher: ConsumerDispatcher; queue: string; worker: string }> = [];
    for (const worker of deployment.workers) {
      for (const consumer of worker.consumers) {
        // An http_pull consumer is its clients' pulls through the API: nothing runs here for it.
        if (this.unopened.has(consumer.queue) || consumer.type === "http_pull") continue;
        const { dispatcher, release } = await this.openDispatcher(consumer.queue, consumer.queue, worker.name, consumer);
        this.holds.push(release);
        ready.push({ dispatcher, queue: consumer.queue, worker: worker.name });
      }
    }
    // All at once, once every cell is ready, and nothing awaited after: the host's caller (celld
    // dev) has its stop in place for the stop signals before a first batch can run.
    for (const { dispatcher, queue, worker } of ready) {
      dispatcher.start();
      this.dispatchers.push(dispatcher);
      log.info(`queue "${queue}" -> consumer "${worker}"`);
    }
    this.startAdded();
  }

  /**
   * The consumers added through the API: run now and as the API changes them (AddedConsumers).
   * Not awaited, as the config's consumers' start is not (above): their cells open meanwhile.
   */
  private startAdded(): void {
    const { added, deployment, log } = this.options;
    if (added === undefined) return;
    const runs = new AddedConsumerRuns({
      workers: deployment.workers.map((w) => w.name),
      configConsumed: new Set(deployment.workers.flatMap((w) => w.consumers.map((c) => c.queue))),
      unopened: this.unopened,
      cannotConsume: (worker) => this.options.cannotConsume?.(worker),
      start: (consumer, push) => this.startAddedConsumer(consumer, push),
      graceMs: this.options.removedGraceMs ?? 10_000,
      log,
    });
    this.addedRuns = runs;
    this.detachAdded = added.attach(runs);
  }

  private async startAddedConsumer(consumer: AddedConsumer, push: NonNullable<AddedConsumer["push"]>): Promise<StartedConsumer> {
    this.options.allowQueueErrors?.(push.worker, consumer.queue);
    const started = await this.openDispatcher(consumer.cell, consumer.queue, push.worker, push);
    started.dispatcher.start();
    return started;
  }

  /**
   * A dispatcher (not started) for `worker`'s consumer of the cell `cellName`, which it holds open
   * until `release`: neither the idle sweep nor the bound on open cells may close it under it (a
   * pause between leases leaves it looking idle).
   */
  private async openDispatcher(
    cellName: string,
    queue: string,
    worker: string,
    settings: Pick<ConsumerSettings, "maxBatchSize" | "maxBatchTimeoutSeconds" | "maxConcurrency" | "retryDelaySeconds">,
  ): Promise<StartedConsumer> {
    const { registry, clock, log } = this.options;
    const release = registry.hold(cellName);
    try {
      const cell = await registry.open(cellName);
      // The data directory's lock says no other host runs: leases this consumer's owner holds
      // were taken by a host that died, and their batches will never be settled.
      const ended = await cell.expireLeasesOf(hostLeaseOwner);
      if (ended > 0) {
        log.info(
          `queue "${queue}": ${ended} message(s) in batches of a host that stopped without settling them ` +
            `are back in the queue (the interrupted delivery counts as an attempt)`,
        );
      }
      const dispatcher = new ConsumerDispatcher({
        cell,
        // A cell on a worker thread that died closes under the dispatcher; the registry opens it
        // on a new thread (a local cell held here closes only when the host stops).
        reopen: () => registry.open(cellName),
        clock,
        leaseOwner: hostLeaseOwner,
        budget: this.budget,
        invoke: this.client!.invoker(this.bindings.get(worker)!),
        log,
        settings: {
          queue,
          maxBatchSize: settings.maxBatchSize,
          maxBatchTimeoutSeconds: settings.maxBatchTimeoutSeconds,
          maxConcurrency: settings.maxConcurrency,
          retryDelaySeconds: settings.retryDelaySeconds,
          wallTimeSeconds: this.options.wallTimeSeconds ?? limits.consumerWallTimeSecondsDefault,
          consumer: this.options.consumerKindOf?.(worker) ?? "module",
        },
        onBatch: this.options.onBatch,
        ...(this.options.failures === undefined ? {} : { failures: this.options.failures }),
      });
      return { dispatcher, release };
    } catch (error) {
      release();
      throw error;
    }
  }

  /** The config's dispatchers and those of consumers added through the API. */
  private allDispatchers(): ConsumerDispatcher[] {
    return [...this.dispatchers, ...(this.addedRuns?.dispatchers() ?? [])];
  }

  runtimeExited(): void {
    for (const dispatcher of this.allDispatchers()) dispatcher.runtimeExited();
    // workerd leaves its socket file behind, and one started again could not listen there.
    this.dispatchSocketDir?.removeSockets();
  }

  runtimeRestarted(): void {
    for (const dispatcher of this.allDispatchers()) dispatcher.runtimeRestarted();
  }

  /** Each consumer's batches running now and its max_concurrency (for /metrics). */
  consumerLoads(): ConsumerLoad[] {
    return this.allDispatchers().map((d) => ({ queue: d.queue, inUse: d.batchesInFlight, max: d.maxConcurrency }));
  }

  async stop(graceMs: number): Promise<void> {
    this.detachAdded?.();
    this.detachAdded = undefined;
    await Promise.all([...this.dispatchers.splice(0).map((d) => d.stop(graceMs)), this.addedRuns?.stop(graceMs)]);
    this.addedRuns = undefined;
    for (const release of this.holds.splice(0)) release();
    // Only now: a batch still running after the grace period was handed back, and dropping its
    // connection is what ends its wait.
    await this.client?.close();
    this.client = undefined;
  }

  /** Once workerd has stopped: nothing will send any more. */
  async dispose(): Promise<void> {
    await this.producerServer?.close();
    this.producerServer = undefined;
    // workerd leaves its socket file behind when it exits.
    this.dispatchSocketDir?.close();
    this.dispatchSocketDir = undefined;
  }
}

/**
 * A queue whose own file is damaged, written by a newer celld, or another queue's: a failure of
 * that file alone. A full disk or a read-only directory fails every queue, and stops the host (see
 * startHost).
 */
function fileOfItsOwn(error: unknown): StorageFailure | undefined {
  const storage = isCellError(error, "ERR_STORAGE") ? error.storage : undefined;
  const cause = storage?.cause;
  return cause === "corrupt" || cause === "newer-format" || cause === "misplaced" ? storage : undefined;
}
