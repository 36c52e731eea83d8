import { fdatasync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CellObserver, CellTally, SyncFile } from "@celld/queue-cell";
import { ConnectionMetrics } from "./connection-metrics.ts";
import { ThreadCpuMetrics } from "./thread-cpu-metrics.ts";
import { queueLabelsOf, type QueueLabels } from "./queue-labels.ts";

const queueLabelNames = ["environment", "queue"] as const;

/** Seconds; a commit is one fdatasync on a quiet disk (~1 ms) and tens of ms on a busy one. */
const diskSecondsBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Seconds; a queue() handler may run up to its 15-minute wall time. */
const handlerSecondsBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];
/** Seconds from a message's send to its ack: up to the four-day retention. */
const ageSecondsBuckets = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 1800, 3600, 21_600, 86_400, 345_600];

/** Which tally field feeds which counter, with the counter's name and help. */
const tallyCounters: ReadonlyArray<readonly [keyof CellTally, string, string]> = [
  ["sent", "celld_queue_messages_sent_total", "Messages a send committed to the queue."],
  ["delivered", "celld_queue_messages_delivered_total", "Deliveries: leases handed out, each delivery of a message counted."],
  ["acked", "celld_queue_messages_acked_total", "Messages acknowledged (and so deleted)."],
  ["retried", "celld_queue_messages_retried_total", "Messages retried (nacked) and ready again after their delay."],
  ["deadLettered", "celld_queue_messages_dead_lettered_total", "Messages that failed their last delivery, moved to a dead-letter set or queue."],
  ["deletedAfterLastRetry", "celld_queue_messages_deleted_after_last_retry_total", "Messages that failed their last delivery with no dead-letter queue, deleted."],
  ["expiredByRetention", "celld_queue_messages_expired_total", "Messages deleted by the four-day retention before an ack."],
  ["leasesExpired", "celld_queue_leases_expired_total", "Leases that ran out before an ack or a nack (a failed delivery)."],
  ["staleAcksRefused", "celld_queue_stale_acks_refused_total", "Acks and nacks refused: their lease was no longer the message's."],
  ["replayed", "celld_queue_messages_replayed_total", "Dead letters replayed to ready."],
  ["purged", "celld_queue_messages_purged_total", "Messages deleted by a purge."],
];

const misnamedDefaultMetrics = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

export interface BatchObservation {
  queue: string;
  outcome: string;
  durationSeconds: number;
  /** Seconds from send to ack, one per message acked. */
  ackedAgesSeconds: readonly number[];
}

/**
 * celld's metrics in one prom-client registry: the counters cells tell through their observer,
 * the batches the consumers report, the disk's flushes, and Node's own process metrics. The
 * per-queue gauges are read from the cells at each scrape (queue-gauges.ts).
 */
export class CelldMetrics {
  readonly registry = new Registry();
  readonly workerEnv: string;
  private readonly tally = new Map<keyof CellTally, Counter<"environment" | "queue">>();
  private readonly sendsRefused: Counter<"environment" | "queue" | "code">;
  private readonly sendSeconds: Histogram<"environment" | "queue">;
  private readonly batchSeconds: Histogram<"environment" | "queue">;
  private readonly batches: Counter<"environment" | "queue" | "outcome">;
  private readonly ackAgeSeconds: Histogram<"environment" | "queue">;
  private readonly fsyncSeconds: Histogram;
  readonly workerdExits: Counter;
  readonly workerdRestarts: Counter;
  /** The ports' client connections (their guards' counters). */
  readonly connections: ConnectionMetrics;
  /** CPU time by thread, with cell threads (`--cell-threads`). */
  readonly threadCpu: ThreadCpuMetrics;

  constructor(options: { workerEnv: string }) {
    this.workerEnv = options.workerEnv;
    const registers = [this.registry];
    for (const [field, name, help] of tallyCounters) {
      this.tally.set(field, new Counter({ name, help, labelNames: queueLabelNames, registers }));
    }
    this.sendsRefused = new Counter({
      name: "celld_queue_sends_refused_total",
      help: "Send calls the queue refused, by error code (nothing of them was written).",
      labelNames: [...queueLabelNames, "code"],
      registers,
    });
    this.sendSeconds = new Histogram({
      name: "celld_queue_send_commit_seconds",
      help: "Time from a send's arrival at the queue to its commit being on disk.",
      labelNames: queueLabelNames,
      buckets: diskSecondsBuckets,
      registers,
    });
    this.batchSeconds = new Histogram({
      name: "celld_queue_batch_handler_seconds",
      help: "Time a consumer's queue() handler took over one batch.",
      labelNames: queueLabelNames,
      buckets: handlerSecondsBuckets,
      registers,
    });
    this.batches = new Counter({
      name: "celld_queue_batches_total",
      help: "Batches handed to a consumer's queue() handler, by outcome (ok, exception, wall-time, failed).",
      labelNames: [...queueLabelNames, "outcome"],
      registers,
    });
    this.ackAgeSeconds = new Histogram({
      name: "celld_queue_ack_age_seconds",
      help: "End-to-end age of a message at its ack by a consumer: from its send.",
      labelNames: queueLabelNames,
      buckets: ageSecondsBuckets,
      registers,
    });
    this.fsyncSeconds = new Histogram({
      name: "celld_fsync_seconds",
      help: "Time of each flush (fdatasync) of a queue's log.",
      buckets: diskSecondsBuckets,
      registers,
    });
    this.workerdExits = new Counter({
      name: "celld_workerd_exits_total",
      help: "Times workerd, which runs the Workers, exited while celld ran.",
      registers,
    });
    this.workerdRestarts = new Counter({
      name: "celld_workerd_restarts_total",
      help: "Times celld started workerd again after it exited.",
      registers,
    });
    this.connections = new ConnectionMetrics(this.registry);
    this.threadCpu = new ThreadCpuMetrics(this.registry);
    collectDefaultMetrics({ register: this.registry });
    // Gauges named like counters, which promtool's lint refuses; what they count (open handles,
    // requests, resources) says little about a queue host.
    for (const name of misnamedDefaultMetrics) this.registry.removeSingleMetric(name);
  }

  labelsOf(cellName: string): QueueLabels {
    return queueLabelsOf(cellName, this.workerEnv);
  }

  /** The observer the registry gives the cell named `name` at each open. */
  observerFor = (name: string): CellObserver => {
    const labels = this.labelsOf(name);
    // Every counter of the queue exists from its first open, at 0: a rate over a series that
    // appears at its first increment misses that increment.
    for (const counter of this.tally.values()) counter.inc(labels, 0);
    return {
      committed: (tally) => {
        for (const [field, counter] of this.tally) if (tally[field] > 0) counter.inc(labels, tally[field]);
      },
      sendRefused: (code) => {
        // A closed cell's refusal is retried by its caller on the cell opened in its place.
        if (code !== "ERR_CELL_CLOSED") this.sendsRefused.inc({ ...labels, code });
      },
      sendStarted: () => {
        const start = performance.now();
        return (committed) => {
          if (committed) this.sendSeconds.observe(labels, (performance.now() - start) / 1000);
        };
      },
    };
  };

  /** A flush's time measured elsewhere: on a cell thread (ThreadedCellRegistryOptions.onFileSynced). */
  readonly fileSynced = (seconds: number): void => {
    this.fsyncSeconds.observe(seconds);
  };

  /** fs.fdatasync, timed: what every cell's store flushes its log with. */
  readonly syncFile: SyncFile = (fd, done) => {
    const start = performance.now();
    fdatasync(fd, (error) => {
      if (error === null) this.fsyncSeconds.observe((performance.now() - start) / 1000);
      done(error);
    });
  };

  batch(observation: BatchObservation): void {
    const labels = this.labelsOf(observation.queue);
    this.batches.inc({ ...labels, outcome: observation.outcome });
    this.batchSeconds.observe(labels, observation.durationSeconds);
    for (const age of observation.ackedAgesSeconds) this.ackAgeSeconds.observe(labels, age);
  }
}
