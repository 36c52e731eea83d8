import type { ConsumerDispatcher } from "@celld/bindings";
import type { HostLog } from "../host/host-log.ts";
import type { AddedConsumer, AddedConsumerRunner } from "./added-consumers.ts";

/** A dispatcher started for one added consumer, and how to let go of its cell. */
export interface StartedConsumer {
  dispatcher: ConsumerDispatcher;
  release: () => void;
}

export interface AddedConsumerRunsOptions {
  /** The Workers of the host's deployment. */
  workers: readonly string[];
  /** Cells whose consumer the Workers config declares: the config's consumer runs there, not the API's. */
  configConsumed: ReadonlySet<string>;
  /** Cells the host could not open (QueuesPlugin.prepare): no consumer runs for them. */
  unopened: ReadonlySet<string>;
  /** Why `worker` cannot take batches here, if it cannot (a service-worker script with [assets]). */
  cannotConsume: (worker: string) => string | undefined;
  /** Opens the consumer's cell and starts its dispatcher. */
  start: (consumer: AddedConsumer, push: NonNullable<AddedConsumer["push"]>) => Promise<StartedConsumer>;
  /** How long a removed consumer's batches in flight may run before they are handed back. */
  graceMs: number;
  log: HostLog;
}

/**
 * The API's Worker consumers on one host: the dispatchers run() starts and stops as the list
 * changes (AddedConsumers). A consumer whose settings changed is stopped and started again with
 * the new ones. One that cannot run here (its Worker is not in this deployment, the config has a
 * consumer of its own for the queue) is told of once and kept: it runs on a host where it can.
 */
export class AddedConsumerRuns implements AddedConsumerRunner {
  private readonly running = new Map<string, { shape: string; started: StartedConsumer }>();
  /** Lines already said, so a list told again (every API change) does not repeat them. */
  private readonly said = new Set<string>();
  /** run() calls one after another: a start must not race the stop of the same consumer. */
  private tail: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(private readonly options: AddedConsumerRunsOptions) {}

  workers(): readonly string[] {
    return this.options.workers;
  }

  run(consumers: readonly AddedConsumer[]): Promise<void> {
    const next = this.tail.then(() => this.reconcile(consumers)).catch((error: unknown) => {
      this.options.log.error("the consumers added through the API could not all be stopped", error);
    });
    this.tail = next;
    return next;
  }

  /** The dispatchers running now (for /metrics, and the runtime's exits and restarts). */
  dispatchers(): ConsumerDispatcher[] {
    return [...this.running.values()].map((r) => r.started.dispatcher);
  }

  /** Stops every dispatcher; later run() calls do nothing. */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    await this.tail;
    await Promise.all([...this.running.keys()].map((id) => this.stopOne(id, graceMs)));
  }

  private async reconcile(consumers: readonly AddedConsumer[]): Promise<void> {
    if (this.stopped) return;
    const wanted = new Map<string, AddedConsumer>();
    for (const consumer of consumers) if (this.runnable(consumer)) wanted.set(consumer.consumerId, consumer);
    const stops: Array<Promise<void>> = [];
    for (const [id, { shape }] of this.running) {
      const consumer = wanted.get(id);
      if (consumer === undefined || shapeOf(consumer) !== shape) stops.push(this.stopOne(id, this.options.graceMs));
    }
    await Promise.all(stops);
    for (const consumer of wanted.values()) {
      if (this.running.has(consumer.consumerId)) continue;
      const worker = consumer.push!.worker;
      try {
        const started = await this.options.start(consumer, consumer.push!);
        this.running.set(consumer.consumerId, { shape: shapeOf(consumer), started });
        this.options.log.info(`queue "${consumer.queue}" -> consumer "${worker}" (added through the API)`);
      } catch (error) {
        // Its cell could not be opened (a full disk, a damaged file): the others run; the next
        // change the API tells, or the next start, tries again.
        this.options.log.error(`queue "${consumer.queue}": the consumer "${worker}" added through the API could not start`, error);
      }
    }
  }

  private runnable(consumer: AddedConsumer): boolean {
    const { push } = consumer;
    if (push === undefined || this.options.unopened.has(consumer.cell)) return false;
    const why = this.options.configConsumed.has(consumer.cell)
      ? `the Workers config declares a consumer of its own for queue "${consumer.queue}", which runs instead`
      : !this.options.workers.includes(push.worker)
        ? `Worker "${push.worker}" does not run here; it runs once a deployment has that Worker`
        : this.options.cannotConsume(push.worker);
    if (why === undefined) return true;
    const line = `queue "${consumer.queue}": the consumer "${push.worker}" added through the API is not run: ${why}`;
    if (!this.said.has(line)) this.options.log.warn(line);
    this.said.add(line);
    return false;
  }

  private async stopOne(id: string, graceMs: number): Promise<void> {
    const entry = this.running.get(id);
    if (entry === undefined) return;
    this.running.delete(id);
    try {
      await entry.started.dispatcher.stop(graceMs);
    } finally {
      entry.started.release();
    }
  }
}

/** What a dispatcher was started with: a change to any of it restarts the consumer. */
function shapeOf(consumer: AddedConsumer): string {
  return JSON.stringify([consumer.cell, consumer.queue, consumer.push]);
}
