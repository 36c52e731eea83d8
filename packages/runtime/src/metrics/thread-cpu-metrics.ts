import { Counter, type Registry } from "prom-client";
import { readThreadCpu, type ThreadCpu, type ThreadCpuTimes } from "@celld/queue-cell";

/**
 * `celld_cell_thread_cpu_seconds_total{thread, mode}`: the CPU time of the main thread and of each
 * cell thread (`--cell-threads`), each read from the thread's own /proc/thread-self/stat at each
 * scrape (process_cpu_seconds_total counts every thread of the process together). It tells whether
 * the cell threads or the main thread (HTTP, the producer and consumer glue) is the one that is
 * busy. Not registered until a threaded registry is watched: without cell threads, the series are
 * not there. A thread started again (a thread that died, or `celld dev --watch`'s restart with new
 * threads) starts from 0, which Prometheus's rate() takes as a counter reset.
 */
export class ThreadCpuMetrics {
  private source: (() => Promise<ThreadCpu[]>) | undefined;

  constructor(private readonly registry: Registry) {}

  /** Reads the cell threads' CPU time from `threadCpu` at each scrape; a later call replaces it (a restart). */
  watch(threadCpu: () => Promise<ThreadCpu[]>): void {
    if (this.source === undefined) this.register();
    this.source = threadCpu;
  }

  private register(): void {
    const metrics = this;
    new Counter({
      name: "celld_cell_thread_cpu_seconds_total",
      help: "CPU time of celld's threads, by thread (main, or a cell thread's index) and mode (user, system).",
      labelNames: ["thread", "mode"],
      registers: [this.registry],
      async collect() {
        // A scrape while the threads close, or while one is dying, shows the main thread alone.
        const cellThreads = (await metrics.source?.().catch(() => [])) ?? [];
        this.reset();
        const add = (thread: string, times: ThreadCpuTimes): void => {
          this.inc({ thread, mode: "user" }, times.userMs / 1000);
          this.inc({ thread, mode: "system" }, times.systemMs / 1000);
        };
        const main = readThreadCpu();
        if (main !== undefined) add("main", main);
        for (const { thread, ...times } of cellThreads) add(String(thread), times);
      },
    });
  }
}
