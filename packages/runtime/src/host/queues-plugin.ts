import { ConsumerDispatcher, nodeProducerHandler, type BatchReport, type QueueInvoker } from "@celld/bindings";
import { limits, type CellRegistry, type Clock, type QueueConfig } from "@celld/queue-cell";
import type { WorkerOptions } from "miniflare";
import type { Deployment, WorkerConfig } from "../config/index.ts";
import { queueProducerWorkerOptions } from "../miniflare-queue-wiring.ts";
import type { HostLog } from "./host-log.ts";
import type { HostPlugin, PluginStartContext, WorkerHandle } from "./host-plugin.ts";

export interface QueuesPluginOptions {
  deployment: Deployment;
  registry: CellRegistry;
  clock: Clock;
  log: HostLog;
  /** A consumer invocation's wall-time limit; Cloudflare's 15 minutes unless a test says less. */
  wallTimeSeconds?: number;
  onBatch?: (report: BatchReport) => void;
}

/**
 * Cloudflare Queues for the host: producer bindings reach cells through workerd's own queue
 * binding, and one dispatcher per consumer turns leases into queue() calls.
 */
export class QueuesPlugin implements HostPlugin {
  readonly name = "queues";
  private readonly dispatchers: ConsumerDispatcher[] = [];

  constructor(private readonly options: QueuesPluginOptions) {}

  /** Applies each queue's consumer settings to its cell before anything runs. */
  async configureCells(): Promise<void> {
    const { deployment, registry } = this.options;
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
              deadLetter:
                consumer.deadLetterQueue === undefined
                  ? { kind: "delete" }
                  : { kind: "queue", queue: consumer.deadLetterQueue },
            };
      await registry.open(queue, config);
    }
  }

  workerOptions(worker: WorkerConfig): Partial<WorkerOptions> {
    const { registry } = this.options;
    if (worker.producers.length === 0) return {};
    const wiring = queueProducerWorkerOptions(
      worker.producers,
      (producer) =>
        nodeProducerHandler({
          queue: producer.queue,
          deliveryDelaySeconds: producer.deliveryDelaySeconds,
          getCell: () => registry.open(producer.queue),
        }),
      Object.fromEntries(worker.services.map((s) => [s.binding, s.service])),
    );
    return { queueProducers: wiring.queueProducers, serviceBindings: wiring.serviceBindings };
  }

  async start(context: PluginStartContext): Promise<void> {
    const { deployment, registry, clock, log } = this.options;
    for (const worker of deployment.workers) {
      for (const consumer of worker.consumers) {
        const cell = await registry.open(consumer.queue);
        // One Fetcher per consumer: getWorker() is a synchronous round trip to workerd that
        // blocks the event loop, too dear to pay on every batch.
        let handle: Promise<WorkerHandle> | undefined;
        const invoke: QueueInvoker = async (queue, messages, metadata) => {
          handle ??= context.getWorker(worker.name);
          return (await handle).queue(queue, messages as never, metadata as never);
        };
        const dispatcher = new ConsumerDispatcher({
          cell,
          clock,
          invoke,
          log,
          settings: {
            queue: consumer.queue,
            maxBatchSize: consumer.maxBatchSize,
            maxBatchTimeoutSeconds: consumer.maxBatchTimeoutSeconds,
            maxConcurrency: consumer.maxConcurrency,
            retryDelaySeconds: consumer.retryDelaySeconds,
            wallTimeSeconds: this.options.wallTimeSeconds ?? limits.consumerWallTimeSecondsDefault,
          },
          onBatch: this.options.onBatch,
        });
        dispatcher.start();
        this.dispatchers.push(dispatcher);
        log.info(`queue "${consumer.queue}" -> consumer "${worker.name}"`);
      }
    }
  }

  async stop(graceMs: number): Promise<void> {
    await Promise.all(this.dispatchers.splice(0).map((d) => d.stop(graceMs)));
  }
}
