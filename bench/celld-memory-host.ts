/**
 * celld for the consumer-memory bench (memory-bench.ts), in its own process: one Worker whose
 * queue() handler holds every batch until POST /open-gate, so batches pile up as a slow consumer's
 * would, each filled to 100 messages within its 1 s window. CELLD_BENCH_BATCH_BYTES sets the host's budget of bytes in running batches (unset: the
 * default, limits.consumerBatchBytesInFlightMax).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadDeployment } from "../packages/runtime/src/config/index.ts";
import { startHost } from "../packages/runtime/src/host/host.ts";
import type { HostLog } from "../packages/runtime/src/host/host-log.ts";
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

const quietLog: HostLog = {
  info: () => {},
  warn: (message) => console.error(`[celld] warning: ${message}`),
  error: (message, error) => console.error(`[celld] error: ${message}`, error ?? ""),
  runtime: (line) => console.error(`[workerd] ${line}`),
};

serveHost(async (consumed) => {
  const dir = mkdtempSync(join(tmpdir(), "celld-memory-bench-"));
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  try {
    writeFileSync(join(dir, "wrangler.toml"), wranglerToml);
    writeFileSync(join(dir, "worker.js"), workerScript);
    const budget = process.env.CELLD_BENCH_BATCH_BYTES;
    const host = await startHost({
      deployment: loadDeployment([join(dir, "wrangler.toml")]),
      dataDir: join(dir, "data"),
      port: 0,
      durability: "full",
      log: quietLog,
      consumerBatchBytesInFlightMax: budget === undefined ? undefined : Number(budget),
      onBatch: (report) => consumed(report.acked),
    });
    return {
      url: host.url,
      close: async () => {
        try {
          await host.close();
        } finally {
          remove();
        }
      },
    };
  } catch (error) {
    remove();
    throw error;
  }
});
