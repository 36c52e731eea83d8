import { Agent, createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import type { AddressInfo, Socket } from "node:net";
import { systemClock, type Clock } from "@celld/queue-cell";
import { ConnectionGuard, type ConnectionStats } from "./connection-guard.ts";
import { frontUpstreamSocketsMax } from "./descriptor-budget.ts";
import { forwardRequest, forwardUpgrade, type Upstream } from "./http-proxy.ts";
import { RequestHold, type RequestHoldBounds } from "./request-hold.ts";
import type { RouteReason, WorkerRouter } from "./worker-router.ts";

/**
 * The front door of `--port`: a Node HTTP server in front of workerd, which has no connection
 * limit of its own (a flood of idle connections used up its descriptors and it exited). It holds
 * the clients' connections to a maximum and closes silent ones (ConnectionGuard), picks the
 * Worker for each request (WorkerRouter), and forwards it to the loopback socket where workerd
 * serves that Worker. workerd only ever sees the front's own pooled connections.
 */

export interface FrontStats {
  connections: Readonly<ConnectionStats>;
  /** Requests forwarded, by how their Worker was chosen. */
  requests: Record<RouteReason, number>;
  /** Answered 502/503 by the front: the Worker's socket could not be reached (workerd down or restarting). */
  unreachable: number;
  /** Requests that waited while the Workers were swapped (holdRequests), and those refused 503 for waiting too long. */
  readonly held: { readonly total: number; readonly refused: number };
}

export interface FrontOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Undefined: no Worker is deployed (a new `celld serve`), and every request is answered 404. */
  router: WorkerRouter | undefined;
  /** Where workerd serves each Worker, by name; replace with setUpstreams after a workerd restart. */
  upstreams: ReadonlyMap<string, Upstream>;
  connectionsMax: number;
  /** A connection that sends nothing this long after opening is closed. */
  idleMs?: number;
  /** A request's headers must arrive within this, else 408 and a closed connection. */
  headersTimeoutMs?: number;
  clock?: Clock;
  /** The rate-limited line about closed connections, and about Workers that could not be reached. */
  warn: (line: string) => void;
  /** Told of each request once answered, with the Worker chosen (`celld dev --log-requests`). */
  onAnswered?: (request: FrontRequest) => void;
  /** How many requests, and for how long, holdRequests may keep waiting (requestHoldDefaults). */
  hold?: RequestHoldBounds;
}

export interface FrontRequest {
  method: string;
  /** The path and query as sent. */
  url: string;
  status: number;
  durationMs: number;
  worker: string;
}

export interface Front {
  readonly url: URL;
  readonly stats: FrontStats;
  readonly guard: ConnectionGuard;
  /** Points the Workers at new sockets (workerd restarted); an empty map answers 503 until set again. */
  setUpstreams(upstreams: ReadonlyMap<string, Upstream>): void;
  /** Routes by another deployment's Workers (`celld serve` after a deploy); undefined: none deployed. */
  setRouter(router: WorkerRouter | undefined): void;
  /**
   * New requests (and upgrades) wait, unanswered, until releaseRequests; those already forwarded
   * go on. `celld serve`'s swap holds while it hands storage from one workerd to the next.
   */
  holdRequests(): void;
  /** The held requests go where the router and upstreams point now. */
  releaseRequests(): void;
  /** Resolves once every forwarded request has been answered (or cut). */
  requestsDone(): Promise<void>;
  /** Stops listening, closes idle keep-alive connections, waits for open requests to end. */
  close(): Promise<void>;
}

/** Workers-port defaults; docs/limits.md#connections states them. */
export const frontDefaults = {
  idleMs: 10_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
} as const;

export async function startFront(options: FrontOptions): Promise<Front> {
  let upstreams = options.upstreams;
  let router = options.router;
  // One pool for every Worker: Node keys its sockets by host:port, so each Worker gets its own.
  const agent = new Agent({ keepAlive: true, maxSockets: frontUpstreamSocketsMax, maxFreeSockets: frontUpstreamSocketsMax, scheduling: "lifo" });
  const hold = new RequestHold(options.clock ?? systemClock, options.hold);
  const stats = newFrontStats(hold);
  const unreachable = unreachableReporter(stats, options.warn);
  const choose = (req: IncomingMessage): Chosen | undefined => {
    if (router === undefined) return undefined;
    const choice = router.route(req.headers.host, req.url ?? "/");
    stats.requests[choice.reason]++;
    return { worker: choice.worker, upstream: upstreams.get(choice.worker), workersDevOff: choice.reason === "workers-dev-off" };
  };

  const forwarding: Forwarding = { choose, hold, agent, stats, unreachable, onAnswered: options.onAnswered };
  const server = createServer(
    {
      headersTimeout: options.headersTimeoutMs ?? frontDefaults.headersTimeoutMs,
      // A Worker may stream a response (or take a long upload) for as long as it likes.
      requestTimeout: 0,
      keepAliveTimeout: frontDefaults.keepAliveTimeoutMs,
      connectionsCheckingInterval: 1_000,
    },
    (req: IncomingMessage, res: ServerResponse) => forwardToWorker(req, res, forwarding),
  );
  const upgraded = forwardUpgrades(server, choose, stats, unreachable, hold);
  const guard = new ConnectionGuard(server, {
    name: "--port",
    max: options.connectionsMax,
    idleMs: options.idleMs ?? frontDefaults.idleMs,
    clock: options.clock,
    report: options.warn,
  }).startSweeping();
  stats.connections = guard.stats;

  const url = await listen(server, options.host, options.port);
  let closing: Promise<void> | undefined;
  return {
    url,
    stats,
    guard,
    setUpstreams(next) {
      upstreams = next;
    },
    setRouter(next) {
      router = next;
    },
    holdRequests() {
      hold.hold();
    },
    releaseRequests() {
      hold.release();
    },
    requestsDone() {
      return hold.drained();
    },
    close() {
      // Requests held for a swap that will not finish are answered (503: nothing runs).
      hold.release();
      closing ??= closeFront(server, upgraded, guard, agent);
      return closing;
    },
  };
}

function newFrontStats(hold: RequestHold): FrontStats {
  return {
    connections: { open: 0, accepted: 0, refused: 0, evicted: 0, idleClosed: 0 },
    requests: { "worker-host": 0, route: 0, "custom-domain": 0, "first-worker": 0, "workers-dev-off": 0 },
    unreachable: 0,
    held: {
      get total() {
        return hold.heldTotal;
      },
      get refused() {
        return hold.refusedTotal;
      },
    },
  };
}

interface Forwarding {
  choose: (req: IncomingMessage) => Chosen | undefined;
  hold: RequestHold;
  agent: Agent;
  stats: FrontStats;
  unreachable: (worker: string, error: NodeJS.ErrnoException) => string;
  onAnswered: ((request: FrontRequest) => void) | undefined;
}

/** One request: held during a swap, then routed by the router of the moment it runs, and forwarded. */
function forwardToWorker(req: IncomingMessage, res: ServerResponse, f: Forwarding): void {
  f.hold.admit(() => {
    if (res.destroyed) return;
    const chosen = f.choose(req);
    if (chosen === undefined) return noneDeployed(res);
    const { worker, upstream } = chosen;
    if (f.onAnswered !== undefined) reportWhenAnswered(req, res, worker, f.onAnswered);
    if (chosen.workersDevOff) return workersDevOff(res);
    if (upstream === undefined) return notRunning(res, worker, f.stats);
    res.once("close", f.hold.forwarded());
    forwardRequest(req, res, upstream, f.agent, (error) => {
      res.writeHead(502, { "content-type": "text/plain; charset=utf-8", connection: "close" });
      res.end(f.unreachable(worker, error));
    });
  }, () => heldTooLong(res));
}

interface Chosen {
  worker: string;
  upstream: Upstream | undefined;
  /** The name host of a Worker with `workers_dev = false`: answered 404, never forwarded. */
  workersDevOff: boolean;
}

/** Counts a Worker that could not be reached, says so once a minute, and gives the client's answer. */
function unreachableReporter(stats: FrontStats, warn: (line: string) => void): (worker: string, error: NodeJS.ErrnoException) => string {
  let lastLine = -Infinity;
  return (worker, error) => {
    stats.unreachable++;
    const now = Date.now();
    if (now - lastLine >= 60_000) {
      lastLine = now;
      warn(`--port: Worker "${worker}" could not be reached inside workerd (${error.code ?? error.message}); answering 502 (said once a minute)`);
    }
    return `celld: the Worker "${worker}" could not be reached (${error.code ?? "connection failed"}); try again\n`;
  };
}

/** Joins WebSocket upgrades to the chosen Worker; returns the open upgraded sockets, for close. */
function forwardUpgrades(
  server: Server,
  choose: (req: IncomingMessage) => Chosen | undefined,
  stats: FrontStats,
  unreachable: (worker: string, error: NodeJS.ErrnoException) => string,
  hold: RequestHold,
): Set<Socket> {
  // Node's closeAllConnections leaves upgraded sockets alone: close() ends them itself.
  const upgraded = new Set<Socket>();
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    upgraded.add(socket);
    socket.once("close", () => upgraded.delete(socket));
    hold.admit(
      () => {
        if (!socket.destroyed) upgrade(req, socket, head);
      },
      () => socket.end("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"),
    );
  });
  const upgrade = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    const chosen = choose(req);
    if (chosen === undefined || chosen.workersDevOff) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    const { worker, upstream } = chosen;
    if (upstream === undefined) {
      stats.unreachable++;
      socket.end("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    forwardUpgrade(req, socket, head, upstream, (error) => {
      const body = unreachable(worker, error);
      socket.end(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    });
  };
  return upgraded;
}

async function listen(server: Server, host: string, port: number): Promise<URL> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return new URL(`http://${shownHost}:${address.port}/`);
}

async function closeFront(server: Server, upgraded: Set<Socket>, guard: ConnectionGuard, agent: Agent): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // The host's close gives in-flight work its grace before it stops workerd; by then the
  // requests still open cannot be answered, so their connections go too.
  setTimeout(() => {
    server.closeAllConnections();
    for (const socket of upgraded) socket.destroy();
  }, 1_000).unref();
  await closed;
  guard.stop();
  agent.destroy();
}

function reportWhenAnswered(req: IncomingMessage, res: ServerResponse, worker: string, tell: (request: FrontRequest) => void): void {
  const started = performance.now();
  res.once("finish", () => tell({ method: req.method ?? "", url: req.url ?? "", status: res.statusCode, durationMs: performance.now() - started, worker }));
}

function noneDeployed(res: ServerResponse): void {
  res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
  res.end("celld: no Worker is deployed here yet (wrangler deploy to the API port deploys one)\n");
}

function workersDevOff(res: ServerResponse): void {
  res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
  // Nothing said of the Worker: its name host is not for the outside (Cloudflare's disabled
  // workers.dev URL says as little); --log-requests names it for the operator.
  res.end("celld: no Worker answers on this host\n");
}

function heldTooLong(res: ServerResponse): void {
  if (res.destroyed) return;
  res.writeHead(503, { "content-type": "text/plain; charset=utf-8", "retry-after": "1" });
  res.end("celld: the Workers are being replaced and this request waited too long; try again\n");
}

function notRunning(res: ServerResponse, worker: string, stats: FrontStats): void {
  stats.unreachable++;
  res.writeHead(503, { "content-type": "text/plain; charset=utf-8", "retry-after": "1" });
  res.end(`celld: the Worker "${worker}" is not running right now (workerd is starting); try again\n`);
}
