import type { Clock } from "@celld/queue-cell";
import type { Miniflare, WorkerOptions } from "miniflare";
import type { Deployment } from "../config/index.ts";
import { descriptorBudget } from "../front/descriptor-budget.ts";
import { startFront, type Front, type FrontOptions } from "../front/front-server.ts";
import type { Upstream } from "../front/http-proxy.ts";
import type { WorkerRouter } from "../front/worker-router.ts";
import type { HostLog } from "./host-log.ts";
import { readOpenFilesLimit } from "./open-files-limit.ts";

/**
 * The host's stage for `--port`: each Worker on a loopback workerd socket of its own, and the
 * front door (front/front-server.ts) on the user's address routing to them. Miniflare's entry
 * socket runs every request through its entry Worker first (dev tooling: pretty error pages, a
 * made-up request.cf, /cdn-cgi/ trigger routes), which costs about 350 µs of workerd CPU per
 * request; it stays on a free loopback port for Miniflare's own use. With triggerHandlers the
 * user asked for those routes, and the first Worker is reached through the entry socket instead.
 */
export function giveWorkersSockets(workers: WorkerOptions[], viaEntry: boolean): void {
  if (workers.length === 0) throw new Error("a deployment has at least one Worker");
  workers.forEach((own, i) => {
    if (i > 0 || !viaEntry) own.unsafeDirectSockets = [{ host: "127.0.0.1", port: 0 }];
  });
}

export interface WorkersFrontInput {
  mf: Miniflare;
  deployment: Deployment;
  router: WorkerRouter;
  viaEntry: boolean;
  host: string;
  port: number;
  /** Unset: what the descriptor budget leaves for --port's clients (as if the API listened too). */
  connectionsMax: number | undefined;
  openFilesLimit: number | undefined;
  silentConnectionMs: number | undefined;
  clock: Clock;
  log: HostLog;
  onAnswered: FrontOptions["onAnswered"];
}

/** Where workerd serves each Worker now (asked again after a restart of workerd). */
export async function workerUpstreams(mf: Miniflare, deployment: Deployment, viaEntry: boolean): Promise<Map<string, Upstream>> {
  const upstreams = new Map<string, Upstream>();
  for (const [i, worker] of deployment.workers.entries()) {
    const at = i === 0 && viaEntry ? await mf.ready : await mf.unsafeGetDirectURL(worker.name);
    upstreams.set(worker.name, { host: at.hostname, port: Number(at.port) });
  }
  return upstreams;
}

/** The front on the user's address, routing to where workerd serves each Worker. */
export async function startWorkersFront(input: WorkersFrontInput): Promise<Front> {
  const { mf, deployment } = input;
  const upstreams = await workerUpstreams(mf, deployment, input.viaEntry);
  const budget = () =>
    descriptorBudget({ openFilesLimit: input.openFilesLimit ?? readOpenFilesLimit(), workers: deployment.workers.length, api: true });
  return startFront({
    host: input.host,
    port: input.port,
    router: input.router,
    upstreams,
    connectionsMax: input.connectionsMax ?? budget().workersConnectionsMax,
    idleMs: input.silentConnectionMs,
    clock: input.clock,
    warn: (line) => input.log.warn(line),
    ...(input.onAnswered === undefined ? {} : { onAnswered: input.onAnswered }),
  });
}
