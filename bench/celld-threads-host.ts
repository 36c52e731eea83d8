/**
 * celld under `npm run bench threads-host`, in its own process (host-process.ts): the project of
 * threads-host-workers.ts with CELLD_BENCH_THREADS_QUEUES queues, its cells on the main thread or,
 * with CELLD_BENCH_CELL_THREADS > 0, on that many worker threads.
 */
import { startProjectHost } from "./celld-project-host.ts";
import { serveHost } from "./host-process.ts";
import { threadsWorkerScript, threadsWranglerToml } from "./threads-host-workers.ts";

const queues = Number(process.env.CELLD_BENCH_THREADS_QUEUES ?? 1);
const cellThreads = Number(process.env.CELLD_BENCH_CELL_THREADS ?? 0);

serveHost(async (consumed) => {
  return startProjectHost(
    "celld-threads-host-bench-",
    { "wrangler.toml": threadsWranglerToml(queues), "worker.js": threadsWorkerScript },
    { onBatch: (report) => consumed(report.acked), cellThreads },
  );
});
