/**
 * celld under benchmark, in its own process (see host-process.ts): the bench Worker from a real
 * wrangler.toml in a temporary project, durable cells (`durability: "full"`, celld's default:
 * WAL, flushed before every answer), a free port. The project and its data are removed on close.
 * Each sendBatch's stages in this process (HostOptions.onSendStages) are kept for the bench, which
 * takes them with each question about the event loop.
 */
import type { SendStages } from "@celld/bindings";
import { benchWorkerScript, benchWranglerToml } from "./bench-workers.ts";
import { startProjectHost } from "./celld-project-host.ts";
import { serveHost } from "./host-process.ts";

// Enough for every call of the longest workload between two questions (10,000 single sends).
const stagesKeptMax = 20_000;

serveHost(async (consumed) => {
  let stages: SendStages[] = [];
  const host = await startProjectHost(
    "celld-host-bench-",
    { "wrangler.toml": benchWranglerToml(), "worker.js": benchWorkerScript },
    {
      onBatch: (report) => consumed(report.acked),
      onSendStages: (s) => {
        if (stages.length < stagesKeptMax) stages.push(s);
      },
    },
  );
  return {
    ...host,
    takeStages: () => {
      const taken = stages;
      stages = [];
      return taken as unknown as Array<Record<string, number | string>>;
    },
  };
});
