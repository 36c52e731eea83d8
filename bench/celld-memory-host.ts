/**
 * celld for the consumer-memory bench (memory-bench.ts), in its own process: one Worker whose
 * queue() handler holds every batch until POST /open-gate, so batches pile up as a slow consumer's
 * would, each filled to 100 messages within its 1 s window. CELLD_BENCH_BATCH_BYTES sets the
 * host's budget of bytes in running batches (unset: the default,
 * limits.consumerBatchBytesInFlightMax).
 */
import { startProjectHost } from "./celld-project-host.ts";
import { serveHost } from "./host-process.ts";

/** POST /send?n=2&bytes=100000 sends n messages of that many bytes in one sendBatch. */
const workerScript = `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/open-gate") {
      await env.GATE.put("gate", "open");
      return new Response("");
    }
    const n = Number(url.searchParams.get("n"));
    const pad = "x".repeat(Number(url.searchParams.get("bytes")));
    await env.JOBS.sendBatch(Array.from({ length: n }, () => ({ body: pad, contentType: "text" })));
    return new Response("");
  },
  async queue(batch, env) {
    while ((await env.GATE.get("gate")) === null) await new Promise((r) => setTimeout(r, 50));
  },
};
`;

const wranglerToml = `name = "memory"
main = "worker.js"
compatibility_date = "2025-09-01"
kv_namespaces = [{ binding = "GATE", id = "gate" }]

[[queues.producers]]
binding = "JOBS"
queue = "jobs"

[[queues.consumers]]
queue = "jobs"
max_batch_size = 100
max_batch_timeout = 1
`;

serveHost((consumed) => {
  const budget = process.env.CELLD_BENCH_BATCH_BYTES;
  return startProjectHost(
    "celld-memory-bench-",
    { "wrangler.toml": wranglerToml, "worker.js": workerScript },
    {
      consumerBatchBytesInFlightMax: budget === undefined ? undefined : Number(budget),
      onBatch: (report) => consumed(report.acked),
    },
  );
});
