/**
 * celld's queues without Workers, for the many-queues memory bench (many-queues-bench.ts), in its
 * own process: the cell registry (as `celld dev` sizes it: idle cells closed after 5 minutes, at
 * most the open cells its open-files limit allows), the native API, and the metrics every cell
 * reports to. CELLD_BENCH_DATA is the data directory, whose key the bench created.
 */
import { CellRegistry } from "@celld/queue-cell";
import { ApiKeyStore, startApiServer } from "../packages/runtime/src/api/index.ts";
import { openCellsMaxFor, readOpenFilesLimit } from "../packages/runtime/src/host/open-files-limit.ts";
import { CelldMetrics } from "../packages/runtime/src/metrics/celld-metrics.ts";
import { MetricsEndpoint } from "../packages/runtime/src/metrics/metrics-endpoint.ts";
import { defaultWorkerEnv } from "../packages/runtime/src/api/index.ts";
import { serveHost } from "./host-process.ts";

serveHost(async () => {
  const dataDir = process.env.CELLD_BENCH_DATA;
  if (dataDir === undefined) throw new Error("CELLD_BENCH_DATA names the data directory");
  const metrics = new CelldMetrics({ workerEnv: defaultWorkerEnv });
  const registry = new CellRegistry({
    dataDir,
    idleCloseMs: 5 * 60_000,
    openCellsMax: openCellsMaxFor(readOpenFilesLimit()),
    observe: metrics.observerFor,
    syncFile: metrics.syncFile,
  });
  const keys = ApiKeyStore.open(dataDir);
  const api = await startApiServer({ registry, keys, dataDir, port: 0, metrics: new MetricsEndpoint({ metrics, registry, public: true }) });
  return {
    url: new URL(api.url),
    async close() {
      await api.close();
      await registry.closeAll();
      keys.close();
    },
  };
});
