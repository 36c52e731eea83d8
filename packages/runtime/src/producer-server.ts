/**
 * The Node HTTP server that workerd's queue producer bindings talk to directly.
 *
 * Why not a Miniflare `{ node }` service binding: that runs every send through an extra JavaScript
 * Worker inside workerd (which copies the request to add a header) and then Miniflare's loopback
 * router in Node. Measured on a 2-core machine, that hop costs about 300 µs of workerd CPU per
 * send. Here each producer binding is a workerd `external` service pointing at this server, and
 * workerd itself adds the header that says which binding a request comes from.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type NodeServiceHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

/** The header workerd adds to each producer request: which registered handler answers it. */
export const producerRouteHeader = "x-celld-producer";

/** A workerd external service, as Miniflare's `serviceBindings` takes one. */
export interface ExternalServiceDesignator {
  external: {
    address: string;
    http: { injectRequestHeaders: Array<{ name: string; value: string }> };
  };
}

// workerd keeps connections to an external service open between requests; a short server-side
// timeout would close them under it and cost a reconnect (or a reset) on the next send.
const keepAliveMs = 10 * 60 * 1000;

export class ProducerServer {
  private constructor(
    private readonly server: Server,
    private readonly routes: Map<string, NodeServiceHandler>,
    /** `host:port`, as workerd's external service takes it. */
    readonly address: string,
  ) {}

  /** Listens on a free port of `host` (loopback: only this machine's workerd should call it). */
  static async start(host = "127.0.0.1"): Promise<ProducerServer> {
    const routes = new Map<string, NodeServiceHandler>();
    const server = createServer({ keepAliveTimeout: keepAliveMs, requestTimeout: 0 }, (req, res) => {
      const route = req.headers[producerRouteHeader];
      const handler = typeof route === "string" ? routes.get(route) : undefined;
      if (handler === undefined) {
        res.writeHead(404, { "content-type": "text/plain" });
        res.end(`celld: no queue producer is registered as ${JSON.stringify(route ?? null)}`);
        return;
      }
      void Promise.resolve(handler(req, res)).catch((error: unknown) => {
        // The handler answers every operating error itself; what reaches here is a bug, and the
        // Worker's send() must still get an answer rather than hang.
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end(`celld: internal error: ${error instanceof Error ? error.message : String(error)}`);
      });
    });
    server.headersTimeout = 0;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const { address, port } = server.address() as AddressInfo;
    return new ProducerServer(server, routes, `${address}:${port}`);
  }

  /**
   * Registers `handler` and returns the service binding that reaches it. `label` (the producer's
   * binding name) only makes the route readable in a 404; each call gets a route of its own.
   */
  serviceFor(label: string, handler: NodeServiceHandler): ExternalServiceDesignator {
    const route = `${this.routes.size + 1}:${label}`;
    this.routes.set(route, handler);
    return {
      external: {
        address: this.address,
        http: { injectRequestHeaders: [{ name: producerRouteHeader, value: route }] },
      },
    };
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
