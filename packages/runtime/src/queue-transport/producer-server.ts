/**
 * The Node HTTP server that workerd's queue producer bindings talk to directly.
 *
 * Why not a Miniflare `{ node }` service binding: that runs every send through an extra JavaScript
 * Worker inside workerd (which copies the request to add a header) and then Miniflare's loopback
 * router in Node. Measured on a 2-core machine, that hop costs about 300 µs of workerd CPU per
 * send. Here each producer binding is a workerd `external` service pointing at this server, and
 * workerd itself adds the header that says which binding a request comes from.
 *
 * It listens on a Unix socket in a directory of its own (mode 0700): the host's `<data>/run`, or a
 * private temp directory when that path is too long for a socket. Only this user's processes can
 * connect. On a loopback port any local process could, and a guessed route header (they are
 * short) would let it put messages on a queue. Measured against loopback TCP on a 2-core machine,
 * the socket also costs a little less CPU per send (medians about 10% lower in Node and in
 * workerd, within the machine's noise). Without Unix sockets (Windows) it listens on 127.0.0.1.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SocketDir } from "./socket-dir.ts";

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

/** Where the server listens: a Unix socket's path, or a loopback host and port. */
export type ProducerServerListen = { socketPath: string } | { host: string; port: number };

export class ProducerServer {
  private constructor(
    private readonly server: Server,
    private readonly routes: Map<string, NodeServiceHandler>,
    readonly listening: ProducerServerListen,
    private readonly socketDir: SocketDir | undefined,
  ) {}

  /** Where it listens, as workerd's external service takes it: `unix:/path` or `host:port`. */
  get address(): string {
    return "socketPath" in this.listening ? `unix:${this.listening.socketPath}` : `${this.listening.host}:${this.listening.port}`;
  }

  /**
   * Listens on a Unix socket, or with `transport: "tcp"` (or no Unix sockets here) on a free
   * loopback port: only this machine's workerd should call it. The socket goes in `socketDir`
   * (made mode 0700; the host passes `<data>/run`, which its data-directory lock makes its own, so
   * a socket left there by a crash is removed), or else in a new private directory under the OS
   * temporary directory.
   */
  static async start(options: { transport?: "unix" | "tcp"; socketDir?: string } = {}): Promise<ProducerServer> {
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
    const unix = (options.transport ?? "unix") === "unix";
    const socketDir = unix ? SocketDir.open([socketName], options.socketDir) : undefined;
    const socketPath = socketDir?.socketPath(socketName);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        const listening = (): void => {
          server.off("error", reject);
          resolve();
        };
        if (socketPath !== undefined) server.listen(socketPath, listening);
        else server.listen(0, "127.0.0.1", listening);
      });
    } catch (error) {
      socketDir?.close();
      throw error;
    }
    if (socketPath !== undefined) {
      return new ProducerServer(server, routes, { socketPath }, socketDir);
    }
    const { address, port } = server.address() as AddressInfo;
    return new ProducerServer(server, routes, { host: address, port }, undefined);
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
    this.socketDir?.close();
  }
}

const socketName = "producers.sock";
