import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { ConsumerDispatcher, InFlightBudget, type ConsumerFailureLog, type ConsumerKind, nodeProducerHandler, type BatchReport } from "@celld/bindings";
import { isCellError, limits, type CellRegistry, type Clock, type QueueConfig, type StorageFailure } from "@celld/queue-cell";
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

export interface QueuesPluginOptions {
  deployment: Deployment;
  registry: CellRegistry;
  clock: Clock;
  log: HostLog;
  /** A consumer invocation's wall-time limit; Cloudflare's 15 minutes unless a test says less. */
  wallTimeSeconds?: number;
  /** Body bytes every consumer's unsettled batches may hold together (see InFlightBudget). */
  batchBytesInFlightMax?: number;
  /** The host's data directory (locked by it): the producer and dispatch sockets go in its `run/`. */
  dataDir?: string;
  onBatch?: (report: BatchReport) => void;
  /** Where failed batches are told of, shared with the handler shim's reports (see host.ts). */
  failures?: ConsumerFailureLog;
  /** How a consumer Worker is written, known once it is bundled; a module unless said. */
  consumerKindOf?: (worker: string) => ConsumerKind;
  /**
   * The named entrypoint its batches go through, known once it is bundled; unset: its default
   * export (see queueDispatchWorkerOptions).
   */
  queueEntrypointOf?: (worker: string) => string | undefined;
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
  /** Releases of the consumers' holds on their cells (CellRegistry.hold). */
  private readonly holds: Array<() => void> = [];
  /** The dispatch Worker's binding to each consumer Worker, by Worker name. */
  private readonly bindings: Map<string, string>;
  private client: QueueDispatchClient | undefined;
  private producerServer: ProducerServer | undefined;
  /** Where the dispatch Worker's Unix socket goes; undefined: it listens on loopback TCP. */
  private dispatchSocketDir: SocketDir | undefined;
  /** Storage failures behind Workers' refused sends, told to the operator once a minute per queue and cause. */
  private readonly producerStorageLog: StorageFailureLog;
  /** What the host's requests to the dispatch Worker carry; any other caller is refused. */
  private readonly dispatchKey = randomBytes(32).toString("hex");
  /** Queues whose file prepare() found damaged, of a newer format or another queue's: no consumer runs for them. */
  private readonly unopened = new Set<string>();

  constructor(private readonly options: QueuesPluginOptions) {
    this.bindings = consumerBindings(options.deployment.workers.filter((w) => w.consumers.some((c) => c.type === "worker")).map((w) => w.name));
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
    for (const queue of deployment.queues) {
      const consumer = consumers.get(queue);
      const config: Partial<QueueConfig> =
        consumer === undefined
          ? // No consumer: messages wait for one (or for the native API) and go to the queue's
            // own dead-letter set if a lease keeps failing.
            { deadLetter: { kind: "set" } }
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
    const { deployment, registry, clock, log } = this.options;
    if (this.bindings.size === 0) return;
    const client = new QueueDispatchClient(
      this.dispatchSocketDir === undefined
        ? await context.directUrl(queueDispatchWorkerName)
        : { socketPath: unixDirectSocketListening(this.dispatchSocketDir.socketPath(queueDispatchSocketName)) },
      this.dispatchKey,
    );
    this.client = client;
    // One budget for all consumers: they share this host's memory.
    const budget = new InFlightBudget(this.options.batchBytesInFlightMax ?? limits.consumerBatchBytesInFlightMax);
    const ready: Array<{ dispatcher: ConsumerDispatcher; queue: string; worker: string }> = [];
    for (const worker of deployment.workers) {
      for (const consumer of worker.consumers) {
        // An http_pull consumer is its clients' pulls through the API: nothing runs here for it.
        if (this.unopened.has(consumer.queue) || consumer.type === "http_pull") continue;
        // The dispatcher keeps this cell object for good: neither the idle sweep nor the bound on
        // open cells may close it under it (a pause between leases leaves it looking idle).
        this.holds.push(registry.hold(consumer.queue));
        const cell = await registry.open(consumer.queue);
        // The data directory's lock says no other host runs: leases this consumer's owner holds
        // were taken by a host that died, and their batches will never be settled.
        const ended = await cell.expireLeasesOf(hostLeaseOwner);
        if (ended > 0) {
          log.info(
            `queue "${consumer.queue}": ${ended} message(s) in batches of a host that stopped without settling them ` +
              `are back in the queue (the interrupted delivery counts as an attempt)`,
          );
        }
        const dispatcher = new ConsumerDispatcher({
          cell,
          clock,
          leaseOwner: hostLeaseOwner,
          budget,
          invoke: client.invoker(this.bindings.get(worker.name)!),
          log,
          settings: {
            queue: consumer.queue,
            maxBatchSize: consumer.maxBatchSize,
            maxBatchTimeoutSeconds: consumer.maxBatchTimeoutSeconds,
            maxConcurrency: consumer.maxConcurrency,
            retryDelaySeconds: consumer.retryDelaySeconds,
            wallTimeSeconds: this.options.wallTimeSeconds ?? limits.consumerWallTimeSecondsDefault,
            consumer: this.options.consumerKindOf?.(worker.name) ?? "module",
          },
          onBatch: this.options.onBatch,
          ...(this.options.failures === undefined ? {} : { failures: this.options.failures }),
        });
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
  }

  runtimeExited(): void {
    for (const dispatcher of this.dispatchers) dispatcher.runtimeExited();
    // workerd leaves its socket file behind, and one started again could not listen there.
    this.dispatchSocketDir?.removeSockets();
  }

  runtimeRestarted(): void {
    for (const dispatcher of this.dispatchers) dispatcher.runtimeRestarted();
  }

  /** Each consumer's batches running now and its max_concurrency (for /metrics). */
  consumerLoads(): ConsumerLoad[] {
    return this.dispatchers.map((d) => ({ queue: d.queue, inUse: d.batchesInFlight, max: d.maxConcurrency }));
  }

  async stop(graceMs: number): Promise<void> {
    await Promise.all(this.dispatchers.splice(0).map((d) => d.stop(graceMs)));
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
