/**
 * A bench child's celld: a temporary project holding `files` (its wrangler.toml first), started
 * on a free port with durable cells and a log that speaks only when something is wrong. The
 * project and its data are removed on close. Runs inside serveHost (host-process.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadDeployment } from "../packages/runtime/src/config/index.ts";
import { startHost, type HostOptions } from "../packages/runtime/src/host/host.ts";
import type { HostLog } from "../packages/runtime/src/host/host-log.ts";
import { benchWorkerdV8Flags } from "./celld-v8-flags.ts";
import type { ServedHost } from "./host-process.ts";

// The bench prints its own lines; the host only speaks up when something is wrong.
const quietLog: HostLog = {
  info: () => {},
  warn: (message) => console.error(`[celld] warning: ${message}`),
  error: (message, error) => console.error(`[celld] error: ${message}`, error ?? ""),
  runtime: (line) => console.error(`[workerd] ${line}`),
};

export async function startProjectHost(
  prefix: string,
  files: { "wrangler.toml": string; [name: string]: string },
  options: Pick<HostOptions, "onBatch" | "onSendStages" | "consumerBatchBytesInFlightMax" | "cellThreads">,
): Promise<ServedHost> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const deployment = loadDeployment([join(dir, "wrangler.toml")]);
    for (const warning of deployment.warnings) console.error(`[celld] config warning: ${JSON.stringify(warning)}`);
    const host = await startHost({
      deployment,
      dataDir: join(dir, "data"),
      port: 0,
      durability: "full",
      log: quietLog,
      workerdV8Flags: benchWorkerdV8Flags(),
      ...options,
    });
    return {
      url: host.url,
      directUrl: await host.miniflare.unsafeGetDirectURL(deployment.workers[0]!.name),
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
}
