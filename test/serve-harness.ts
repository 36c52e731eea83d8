import { Agent, request } from "node:http";
import { systemClock, type QueueCells } from "@celld/queue-cell";
import type { ConsumerConfig } from "../packages/runtime/src/config/index.ts";
import { DeployService } from "../packages/runtime/src/deploy/deploy-service.ts";
import { DeployStore } from "../packages/runtime/src/deploy/deploy-store.ts";
import { frontUpstreamSocketsMax } from "../packages/runtime/src/front/descriptor-budget.ts";
import { startFront, type Front } from "../packages/runtime/src/front/front-server.ts";
import { requestHoldDefaults } from "../packages/runtime/src/front/request-hold.ts";
import { openCellRegistry } from "../packages/runtime/src/host/cell-registry-start.ts";
import type { HostLog } from "../packages/runtime/src/host/host-log.ts";
import { ServeRuntime } from "../packages/runtime/src/serve/serve-runtime.ts";

/**
 * `celld serve`'s parts in this process, as cli/serve.ts puts them together (cells, front door,
 * ServeRuntime, DeployService), without the API server: deploys go straight to DeployService,
 * with the multipart body wrangler sends. For the swap's tests and `npm run bench deploy`.
 */

export interface ServeStack {
  front: Front;
  runtime: ServeRuntime;
  service: DeployService;
  registry: QueueCells;
  lines: string[];
  close(): Promise<void>;
}

export async function startServeStack(dataDir: string, consumersOf?: (script: string) => ConsumerConfig[], graceMs = 10_000): Promise<ServeStack> {
  const lines: string[] = [];
  const log: HostLog = {
    info: (m) => lines.push(m),
    warn: (m) => lines.push(`warning: ${m}`),
    error: (m, e) => lines.push(`error: ${m} ${e instanceof Error ? e.message : ""}`),
    runtime: (line) => lines.push(line),
  };
  const none = { workers: [], queues: [], warnings: [] };
  const registry = openCellRegistry({ deployment: none, dataDir }, none, systemClock, log);
  const front = await startFront({
    host: "127.0.0.1",
    port: 0,
    router: undefined,
    upstreams: new Map(),
    connectionsMax: 2_000,
    hold: { ...requestHoldDefaults, forwardingMax: frontUpstreamSocketsMax },
    warn: (l) => lines.push(l),
  });
  const runtime = new ServeRuntime({ dataDir, registry, front, log, graceMs });
  const service = new DeployService(new DeployStore(dataDir), runtime, consumersOf);
  await service.start();
  return {
    front,
    runtime,
    service,
    registry,
    lines,
    close: async () => {
      await runtime.stop();
      await front.close();
      await registry.closeAll();
    },
  };
}

export interface UploadParts {
  script: string;
  metadata: Record<string, unknown>;
}

/** wrangler's upload body (undici's FormData, encoded by a Request) of one ES module `index.js`. */
export async function uploadBody(source: string, metadata: Record<string, unknown>): Promise<{ body: Uint8Array; contentType: string }> {
  const form = new FormData();
  form.set("metadata", JSON.stringify({ main_module: "index.js", compatibility_date: "2025-01-01", ...metadata }));
  form.set("index.js", new File([source], "index.js", { type: "application/javascript+module" }));
  const encoded = new Request("http://celld.invalid/", { method: "PUT", body: form });
  return { body: new Uint8Array(await encoded.arrayBuffer()), contentType: encoded.headers.get("content-type")! };
}

/** `wrangler deploy` of `source` as Worker `script`, through DeployService. */
export async function deploy(stack: ServeStack, script: string, source: string, metadata: Record<string, unknown>): Promise<void> {
  const { body, contentType } = await uploadBody(source, metadata);
  await stack.service.upload(script, body, contentType, { deploy: true, annotations: {} });
}

/** Version `n` of a Worker that reads KV on every request and counts in a Durable Object. */
export function kvWorker(n: number): string {
  return `
import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject {
  add() {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS hits (id INTEGER PRIMARY KEY AUTOINCREMENT)");
    return this.ctx.storage.sql.exec("INSERT INTO hits DEFAULT VALUES RETURNING id").one().id;
  }
  rows() {
    return this.ctx.storage.sql.exec("SELECT count(*) AS n FROM hits").one().n;
  }
}
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const counter = env.COUNTER.get(env.COUNTER.idFromName("one"));
    if (url.pathname === "/put") { await env.KV.put("greeting", "hello"); return new Response("ok"); }
    if (url.pathname === "/count") return new Response("v${n} " + (await counter.add()));
    if (url.pathname === "/rows") return new Response(String(await counter.rows()));
    return new Response("v${n} " + (await env.KV.get("greeting")));
  },
};`;
}

export const noSteps = { new_classes: [], new_sqlite_classes: [], renamed_classes: [], deleted_classes: [], transferred_classes: [] };
export function kvMetadata(first: boolean): Record<string, unknown> {
  return {
    bindings: [
      { type: "kv_namespace", name: "KV", namespace_id: "kv1" },
      { type: "durable_object_namespace", name: "COUNTER", class_name: "Counter" },
    ],
    ...(first ? { migrations: { new_tag: "v1", steps: [{ ...noSteps, new_sqlite_classes: ["Counter"] }] } } : {}),
  };
}

export interface LoadResult {
  sent: number;
  /** Answers by status (0: no answer: a connection error). */
  statuses: Map<number, number>;
  /** Each answer's body with its status, in the order answers came. */
  answers: Array<{ status: number; body: string; sentAtMs: number; answeredAtMs: number }>;
  errors: string[];
}

/**
 * A steady stream of GETs to `url` at `perSecond`, each on a pooled keep-alive connection, until
 * stop() is called; then waits for every answer. Requests are sent on schedule whatever the
 * answers do (an open loop), as clients on the internet do.
 */
export function steadyLoad(url: URL, host: string, perSecond: number, pathOf: (i: number) => string): { stop(): Promise<LoadResult> } {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const result: LoadResult = { sent: 0, statuses: new Map(), answers: [], errors: [] };
  const pending = new Set<Promise<void>>();
  const started = performance.now();
  const one = (i: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const sentAtMs = performance.now() - started;
      const req = request({ host: url.hostname, port: url.port, path: pathOf(i), headers: { host }, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          result.statuses.set(status, (result.statuses.get(status) ?? 0) + 1);
          result.answers.push({ status, body: Buffer.concat(chunks).toString(), sentAtMs, answeredAtMs: performance.now() - started });
          resolve();
        });
        res.on("error", (e) => {
          result.errors.push(e.message);
          resolve();
        });
      });
      req.on("error", (e) => {
        result.statuses.set(0, (result.statuses.get(0) ?? 0) + 1);
        result.errors.push(e.message);
        resolve();
      });
      req.end();
    });
  // Sent by the clock, not by a fixed interval: a late tick sends what it owes.
  const intervalMs = 1000 / perSecond;
  const timer = setInterval(() => {
    const owed = Math.floor((performance.now() - started) / intervalMs) - result.sent;
    for (let k = 0; k < owed; k++) {
      const p = one(result.sent++);
      pending.add(p);
      void p.then(() => pending.delete(p));
    }
  }, Math.max(1, Math.floor(intervalMs / 2)));
  return {
    async stop() {
      clearInterval(timer);
      await Promise.all([...pending]);
      agent.destroy();
      return result;
    },
  };
}
