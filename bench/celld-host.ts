/**
 * celld under benchmark, in its own process (see host-process.ts): the bench Worker from a real
 * wrangler.toml in a temporary project, durable cells (`durability: "full"`, celld's default:
 * WAL, flushed before every answer), a free port. The project and its data are removed on close.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadDeployment } from "../packages/runtime/src/config/index.ts";
import { startHost } from "../packages/runtime/src/host/host.ts";
import type { HostLog } from "../packages/runtime/src/host/host-log.ts";
import { benchWorkerScript, benchWranglerToml } from "./bench-workers.ts";
import { serveHost } from "./host-process.ts";

// The bench prints its own lines; the host only speaks up when something is wrong.
const quietLog: HostLog = {
  info: () => {},
  warn: (message) => console.error(`[celld] warning: ${message}`),
  error: (message, error) => console.error(`[celld] error: ${message}`, error ?? ""),
  runtime: (line) => console.error(`[workerd] ${line}`),
};

serveHost(async (consumed) => {
  const dir = mkdtempSync(join(tmpdir(), "celld-host-bench-"));
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  try {
    writeFileSync(join(dir, "wrangler.toml"), benchWranglerToml());
    writeFileSync(join(dir, "worker.js"), benchWorkerScript);
    const deployment = loadDeployment([join(dir, "wrangler.toml")]);
    for (const warning of deployment.warnings) console.error(`[celld] config warning: ${JSON.stringify(warning)}`);
    const host = await startHost({
      deployment,
      dataDir: join(dir, "data"),
      port: 0,
      durability: "full",
      log: quietLog,
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
