import type { QueueConfig } from "@celld/queue-cell";

/**
 * A consumer added through Cloudflare's REST API (`wrangler queues consumer add`, `consumer http
 * add`, the SDK, wrangler deploy's consumer calls), as the host needs it. The API's catalog is its
 * truth (cloudflare-api/queues/added-consumers-of.ts makes these from it); the host only runs them.
 */
export interface AddedConsumer {
  consumerId: string;
  /** The registry's name of the cell it consumes. */
  cell: string;
  /** The queue's short name, for lines and reports. */
  queue: string;
  type: "worker" | "http_pull";
  /** What the consumer asks of its cell: deliveries, dead-letter policy, a pull consumer's lease length. */
  policy: Pick<QueueConfig, "maxDeliveries" | "deadLetter"> & Partial<Pick<QueueConfig, "visibilityTimeoutSeconds">>;
  /** A Worker consumer's Worker and batching; undefined for an http_pull consumer (its clients pull). */
  push:
    | {
        worker: string;
        maxBatchSize: number;
        maxBatchTimeoutSeconds: number;
        maxConcurrency: number;
        retryDelaySeconds: number;
      }
    | undefined;
}

/** What a running host lends AddedConsumers: its Workers, and a way to run a set of consumers. */
export interface AddedConsumerRunner {
  /** The Workers this host runs. */
  workers(): readonly string[];
  /**
   * Runs exactly the Worker consumers of `consumers`; resolves once those it no longer runs have
   * stopped. Never rejects: a consumer that cannot start is the runner's to tell of.
   */
  run(consumers: readonly AddedConsumer[]): Promise<void>;
}

/**
 * Where the API's consumers meet the host that runs them. It outlives each host (a `--watch`
 * restart, a deploy to `celld serve`): the API tells it every change, and the host running at the
 * time (attach) runs the Worker consumers, so a consumer added or removed needs no restart. A host
 * starting reads `current` before workerd runs, for the policies its queues' cells get (prepare).
 */
export class AddedConsumers {
  private runner: AddedConsumerRunner | undefined;

  /** `initial`: those the catalog held when celld started (readAddedConsumers). */
  constructor(private list: readonly AddedConsumer[] = []) {}

  get current(): readonly AddedConsumer[] {
    return this.list;
  }

  /** The API's whole list after a change; resolves once the host runs it (removed ones stopped). */
  async set(list: readonly AddedConsumer[]): Promise<void> {
    this.list = list;
    await this.runner?.run(list);
  }

  /**
   * Whether `worker` runs on the host now: Cloudflare refuses a consumer for a Worker that does not
   * exist. With no host attached (nothing deployed to `celld serve`, a restart under way) none does.
   */
  runs(worker: string): boolean {
    return this.runner?.workers().includes(worker) ?? false;
  }

  /** A host, once its Workers run: it runs the current list now, and each later one. Returns the detach. */
  attach(runner: AddedConsumerRunner): () => void {
    this.runner = runner;
    void runner.run(this.list);
    return () => {
      if (this.runner === runner) this.runner = undefined;
    };
  }
}
