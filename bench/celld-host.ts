/**
 * celld under benchmark, in its own process (see host-process.ts): the bench Worker from a real
 * wrangler.toml in a temporary project, durable cells (`durability: "full"`, celld's default:
 * WAL, flushed before every answer), a free port. The project and its data are removed on close.
 */
import { benchWorkerScript, benchWranglerToml } from "./bench-workers.ts";
import { startProjectHost } from "./celld-project-host.ts";
import { serveHost } from "./host-process.ts";

serveHost((consumed) =>
  startProjectHost(
    "celld-host-bench-",
    { "wrangler.toml": benchWranglerToml(), "worker.js": benchWorkerScript },
    { onBatch: (report) => consumed(report.acked) },
  ),
);
