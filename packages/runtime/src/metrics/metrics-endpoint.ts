import { ThreadedCellRegistry, type QueueCells, type Clock } from "@celld/queue-cell";
import { CelldMetrics } from "./celld-metrics.ts";
import { expose, type Exposition } from "./exposition.ts";
import { QueueGauges, type ConsumerLoad } from "./queue-gauges.ts";

export interface MetricsEndpointOptions {
  metrics: CelldMetrics;
  registry: QueueCells;
  /** Answer without a key (`--metrics-public`); otherwise a key with `metrics:read` is needed. */
  public?: boolean;
  /** The consumers' batches in flight and their caps, read at each scrape. */
  consumers?: () => Iterable<ConsumerLoad>;
  clock?: Clock;
}

/** What the API server's `GET /metrics` answers: the gauges read fresh, then the whole registry. */
export class MetricsEndpoint {
  readonly public: boolean;
  private readonly gauges: QueueGauges;

  constructor(private readonly options: MetricsEndpointOptions) {
    this.public = options.public ?? false;
    const clock = options.clock;
    this.gauges = new QueueGauges(options.metrics, options.registry, options.consumers, clock === undefined ? undefined : () => clock.now());
    const { registry } = options;
    if (registry instanceof ThreadedCellRegistry) options.metrics.threadCpu.watch(() => registry.threadCpu());
  }

  /** `environment`: only that environment's queues (a key's); undefined: every queue. */
  async scrape(openMetrics: boolean, environment?: string): Promise<Exposition> {
    this.gauges.refresh();
    return expose(this.options.metrics.registry, { openMetrics, ...(environment === undefined ? {} : { environment }) });
  }
}
