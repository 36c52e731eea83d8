import type { IncomingMessage, ServerResponse } from "node:http";
import type { WorkerOptions } from "miniflare";
import type { WorkerConfig } from "../config/index.ts";
import type { HostPlugin } from "./host-plugin.ts";
import { tailForwardCode } from "../worker-code/worker-code-bundles.ts";

/** The tail Worker's name: not a Worker name a user can deploy (those have no colon). */
export const tailWorkerName = "celld:tail";

/** Bounds a trace post from the tail Worker (a request's console lines are bounded by workerd's log limits). */
const postBytesMax = 16 * 1024 * 1024;

/**
 * `wrangler tail` for `celld serve`: every deployed Worker gets workerd's own tail Worker mechanism
 * (`tails`), pointed at one internal Worker (worker-code/tail-forward.worker.ts) that posts each
 * batch of trace events to `sink` in Node. The events are workerd's trace items, which are
 * Cloudflare's tail events, so they go to wrangler unchanged.
 */
export class TailPlugin implements HostPlugin {
  readonly name = "tail";

  constructor(private readonly sink: (events: unknown[]) => void) {}

  async prepare(): Promise<void> {}

  workerOptions(worker: WorkerConfig): Partial<WorkerOptions> {
    // workerd does not name the Worker in its traces here: the tail entry's props do.
    return { tails: [{ name: tailWorkerName, props: { script: worker.name } }] };
  }

  async extraWorkers(): Promise<WorkerOptions[]> {
    return [
      {
        name: tailWorkerName,
        modules: [{ type: "ESModule", path: "tail-forward.js", contents: tailForwardCode() }],
        compatibilityDate: "2025-01-01",
        serviceBindings: { CELLD_TAIL: { node: (req: IncomingMessage, res: ServerResponse) => this.receive(req, res) } },
      },
    ];
  }

  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async dispose(): Promise<void> {}

  private receive(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes <= postBytesMax) chunks.push(chunk);
    });
    req.on("end", () => {
      res.writeHead(204).end();
      if (bytes > postBytesMax) return;
      try {
        const { script, events } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { script?: unknown; events?: unknown };
        if (typeof script !== "string" || !Array.isArray(events)) return;
        this.sink(events.map((event: unknown) => ({ ...(event as object), scriptName: script })));
      } catch {
        // Not from the tail Worker: nothing to pass on.
      }
    });
  }
}
