import { existsSync } from "node:fs";
import { Gauge, type GaugeConfiguration, type Registry } from "prom-client";
import type { CellCounts, QueueCells } from "@celld/queue-cell";
import type { CelldMetrics } from "./celld-metrics.ts";

const queueLabelNames = ["environment", "queue"] as const;

/** A consumer's batches running now and its max_concurrency. */
export interface ConsumerLoad {
  queue: string;
  inUse: number;
  max: number;
}

/**
 * The per-queue gauges, set from the cells at each scrape. Only open cells are read (opening ten
 * thousand files for a scrape would cost more than the scrape is worth); a queue whose cell has
 * closed, idle, keeps the counts it had when last read, which an idle cell does not change but
 * for delays ending, and its oldest message's age goes on growing from the time it had. A queue
 * not opened since celld started is not listed until it is used.
 */
export class QueueGauges {
  private readonly lastCounts = new Map<string, CellCounts & { paused: boolean }>();
  private readonly backlogMessages: Gauge<"environment" | "queue">;
  private readonly backlogBytes: Gauge<"environment" | "queue">;
  private readonly messages: Gauge<"environment" | "queue" | "state">;
  private readonly oldestAge: Gauge<"environment" | "queue">;
  private readonly concurrency: Gauge<"environment" | "queue">;
  private readonly concurrencyMax: Gauge<"environment" | "queue">;
  private readonly openCells: Gauge;
  private readonly paused: Gauge<"environment" | "queue">;

  constructor(
    private readonly metrics: CelldMetrics,
    private readonly registry: QueueCells,
    private readonly consumers: () => Iterable<ConsumerLoad> = () => [],
    private readonly now: () => number = Date.now,
  ) {
    const registers = [metrics.registry];
    const labelNames = queueLabelNames;
    this.backlogMessages = gaugeIn(metrics.registry, { name: "celld_queue_backlog_messages", help: "Messages not yet acked: ready, delayed and in flight.", labelNames, registers });
    this.backlogBytes = gaugeIn(metrics.registry, { name: "celld_queue_backlog_bytes", help: "Body bytes of the backlog.", labelNames, registers });
    this.messages = gaugeIn(metrics.registry, {
      name: "celld_queue_messages",
      help: "Messages by state: ready, delayed, in_flight (leased), dead_lettered (in the queue's own dead-letter set).",
      labelNames: [...labelNames, "state"],
      registers,
    });
    this.oldestAge = gaugeIn(metrics.registry, { name: "celld_queue_oldest_message_age_seconds", help: "Age of the oldest backlog message; 0 with no backlog.", labelNames, registers });
    this.concurrency = gaugeIn(metrics.registry, { name: "celld_queue_consumer_concurrency", help: "Batches the queue's consumer is running now.", labelNames, registers });
    this.concurrencyMax = gaugeIn(metrics.registry, { name: "celld_queue_consumer_concurrency_max", help: "The consumer's max_concurrency.", labelNames, registers });
    this.paused = gaugeIn(metrics.registry, { name: "celld_queue_delivery_paused", help: "1 while the queue's delivery is paused, else 0.", labelNames, registers });
    this.openCells = gaugeIn(metrics.registry, { name: "celld_open_cells", help: "Queue cells (SQLite files) open now.", registers });
  }

  /**
   * Reads every open cell and sets the gauges; drops the series of queues deleted since. A cell on
   * a worker thread answers committedCounts and queueConfig from a mirror its thread updates with
   * every answer and within a few ms of other commits: a scrape shows that moment, which the next
   * scrape follows, as it would a local cell's commits after the read.
   */
  refresh(): void {
    const open = this.registry.openCells();
    this.openCells.set(open.length);
    for (const cell of open) {
      if (cell.isClosed) continue;
      try {
        this.lastCounts.set(cell.name, { ...cell.committedCounts(), paused: cell.queueConfig.deliveryPaused });
      } catch {
        // Closed under the read: its last counts stand.
      }
    }
    const openNames = new Set(open.map((cell) => cell.name));
    this.backlogMessages.reset();
    this.backlogBytes.reset();
    this.messages.reset();
    this.oldestAge.reset();
    this.paused.reset();
    const nowMs = this.now();
    for (const [name, counts] of this.lastCounts) {
      if (!openNames.has(name) && !existsSync(this.registry.pathOf(name))) {
        this.lastCounts.delete(name);
        continue;
      }
      this.set(this.metrics.labelsOf(name), counts, nowMs);
    }
    this.concurrency.reset();
    this.concurrencyMax.reset();
    for (const load of this.consumers()) {
      const labels = this.metrics.labelsOf(load.queue);
      this.concurrency.set(labels, load.inUse);
      this.concurrencyMax.set(labels, load.max);
    }
  }

  private set(labels: { environment: string; queue: string }, counts: CellCounts & { paused: boolean }, nowMs: number): void {
    this.paused.set(labels, counts.paused ? 1 : 0);
    this.backlogMessages.set(labels, counts.ready + counts.delayed + counts.leased);
    this.backlogBytes.set(labels, counts.backlogBytes);
    this.messages.set({ ...labels, state: "ready" }, counts.ready);
    this.messages.set({ ...labels, state: "delayed" }, counts.delayed);
    this.messages.set({ ...labels, state: "in_flight" }, counts.leased);
    this.messages.set({ ...labels, state: "dead_lettered" }, counts.dead);
    const oldest = counts.oldestMessageAt;
    this.oldestAge.set(labels, oldest === null ? 0 : Math.max(0, (nowMs - oldest) / 1000));
  }
}

/**
 * The registry's gauge of that name, made on first use: `celld dev --watch` starts the API again
 * on each restart, with new gauges over the new host's cells, in the one registry that keeps the
 * counters from celld's start (prom-client refuses a second metric of a name).
 */
function gaugeIn<T extends string>(registry: Registry, config: GaugeConfiguration<T>): Gauge<T> {
  const existing = registry.getSingleMetric(config.name);
  if (existing !== undefined) return existing as Gauge<T>;
  return new Gauge({ ...config, registers: [registry] });
}
