import type { Duplex } from "node:stream";
import { setMaxListeners } from "node:events";
import { performance } from "node:perf_hooks";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { systemClock, UlidSource, type QueueCells, type Clock } from "@celld/queue-cell";
import { AnswerBudget } from "./answer-budget.ts";
import { apiLimits } from "./api-limits.ts";
import type { ApiKeyStore } from "./api-keys.ts";
import { authenticate, authorize } from "./auth.ts";
import { Catalog } from "./catalog.ts";
import { answerParserErrors } from "./parser-errors.ts";
import { ApiError } from "../wire/api-error.ts";
import { toApiError } from "./errors.ts";
import {
  checkContentEncoding,
  checkDeclaredLength,
  delivered,
  expectsContinue,
  jsonAnswer,
  protobufAnswer,
  readBody,
  requestFormat,
  responseFormat,
  writeAnswer,
  writeError,
  writeErrorAndClose,
  type Answer,
} from "./http-io.ts";
import { parseJsonBody } from "./json-body.ts";
import { InexactNumberError } from "./fields.ts";
import { checkSegment, envName } from "./names.ts";
import { checkQuery } from "./paging.ts";
import { checkProtoBounds, notAMessage } from "./proto-bounds.ts";
import { decodeProto, type ProtoTypeName } from "../wire/proto-codec.ts";
import { QueueDirectory, type WorkerQueueOptions } from "./queue-directory.ts";
import { deadLetterRoutes } from "./routes-dead-letters.ts";
import { messageRoutes } from "./routes-messages.ts";
import { peekRoutes } from "./routes-peek.ts";
import { answerMetrics, metricsPath } from "./metrics-route.ts";
import { answerDashboard, answerKey, isDashboardPath, keyPath } from "./dashboard-route.ts";
import type { MetricsEndpoint } from "../metrics/metrics-endpoint.ts";
import { queueRoutes } from "./routes-queues.ts";
import { subscriptionRoutes } from "./routes-subscriptions.ts";
import { StorageFailureLog, storageFailuresIn } from "../plugins/storage-failure-log.ts";
import { ConnectionGuard, type ConnectionStats } from "../front/connection-guard.ts";
import { Router, type ApiDeps, type Reply, type Route } from "./router.ts";
import { CloudflareMount } from "../cloudflare-api/handler.ts";
import { cloudflareRoutes } from "../cloudflare-api/routes.ts";
import type { CloudflareServices } from "../cloudflare-api/services.ts";
import { tellAddedConsumers } from "../cloudflare-api/queues/added-consumers-of.ts";
import { finishInterruptedPurges } from "../cloudflare-api/queues/routes-purge.ts";
import type { AddedConsumers } from "../plugins/added-consumers.ts";

export interface ApiServerTimeouts {
  headersMs: number;
  requestMs: number;
  keepAliveMs: number;
  checkIntervalMs: number;
  /** How long a refused, unread body is read and dropped before the connection closes. */
  refusedBodyDrainMs: number;
  /** A connection on which nothing moves this long (a client not reading its answer) is closed. */
  socketIdleMs: number;
  /** A connection that sends no byte this long after it opens is closed. */
  silentConnectionMs: number;
}

export interface ApiServerOptions {
  registry: QueueCells;
  keys: ApiKeyStore;
  /** The host's data directory (the registry's); the catalog lives in `<dataDir>/api/`. */
  dataDir: string;
  /** 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1: exposing the API beyond this machine is a choice to make explicitly. */
  host?: string;
  /** The registry's clock; times the API reports come from it. */
  clock?: Clock;
  workerQueues?: WorkerQueueOptions;
  timeouts?: Partial<ApiServerTimeouts>;
  /** Told about failures that answered 500, which are bugs. */
  onInternalError?: (error: unknown) => void;
  /**
   * Told, in a line for the operator, of a storage failure behind 503s (a full disk): once per
   * queue and cause a minute, however many calls it refuses.
   */
  onStorageFailure?: (line: string) => void;
  /** Bytes of answers written and not yet read by their clients, server-wide (apiLimits.answerBytesPendingMax); tests set a small one. */
  answerBytesPendingMax?: number;
  /** What the host lends Cloudflare's REST API under /client/v4 (../cloudflare-api). */
  cloudflareServices?: CloudflareServices;
  /**
   * Client connections open at once (apiLimits.connectionsMaxDefault unless set; `celld dev` sizes
   * it from its descriptor budget). Past it, the connection silent longest is closed to make room,
   * or the new one is refused: see front/connection-guard.ts.
   */
  connectionsMax?: number;
  /** Told, at most once a minute, of connections refused or closed (the guard's line). */
  onConnectionsClosed?: (line: string) => void;
  /** Told of each request once answered (`celld dev --log-requests`). */
  onAnswered?: (request: AnsweredRequest) => void;
  /** Serves `GET /metrics` (see metrics-route.ts); without it, /metrics is not found. */
  metrics?: MetricsEndpoint;
  /** Takes a WebSocket upgrade it serves (`wrangler tail`'s) and answers true; else the connection is dropped. */
  onUpgrade?: (req: IncomingMessage, socket: Duplex, head: Buffer) => boolean;
  /**
   * The host's side of the consumers added through Cloudflare's API: told of each change, so a
   * Worker consumer added or removed runs or stops at once. Without it they are only recorded.
   */
  addedConsumers?: AddedConsumers;
}

export interface AnsweredRequest {
  method: string;
  /** The path and query as sent. */
  url: string;
  status: number;
  durationMs: number;
}

export interface ApiServer {
  /** `http://host:port`, without a trailing slash. */
  url: string;
  port: number;
  /** Its client connections: open now, refused, closed for silence (for /metrics). */
  readonly connections: Readonly<ConnectionStats>;
  /** Answers waiting long polls, finishes requests in flight, then closes. */
  close(): Promise<void>;
}

export const apiRoutes: readonly Route[] = [...queueRoutes, ...messageRoutes, ...deadLetterRoutes, ...peekRoutes, ...subscriptionRoutes];

const bodyCaps = { control: apiLimits.controlBodyBytesMax, send: apiLimits.sendBodyBytesMax } as const;

export async function startApiServer(options: ApiServerOptions): Promise<ApiServer> {
  const clock = options.clock ?? systemClock;
  const catalog = Catalog.open(options.dataDir);
  const deps = apiDeps(options, clock, catalog);
  const router = new Router(apiRoutes);
  const answers = new AnswerBudget(options.answerBytesPendingMax ?? apiLimits.answerBytesPendingMax);
  const stopping = new AbortController();
  // Every waiting lease listens to it, and detaches when it returns (see lease-handoff.ts): a
  // thousand concurrent polls are a thousand listeners, not a leak to warn about.
  setMaxListeners(0, stopping.signal);
  const inflight = new Set<Promise<void>>();
  const timeouts = serverTimeouts(options.timeouts);
  const onInternalError = options.onInternalError ?? ((error: unknown) => console.error("celld api: internal error", error));
  const storageLog = new StorageFailureLog(clock, options.onStorageFailure ?? ((line) => console.error(`celld api: ${line}`)));

  const cloudflare = new CloudflareMount({
    routes: cloudflareRoutes,
    deps,
    services: options.cloudflareServices ?? {},
    stopping: stopping.signal,
    onInternalError,
    refusedBodyDrainMs: timeouts.refusedBodyDrainMs,
  });
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    if (options.onAnswered !== undefined) reportWhenAnswered(req, res, options.onAnswered);
    const handling = CloudflareMount.serves(pathOf(req))
      ? cloudflare.handle(req, res)
      : handle(req, res, router, deps, stopping.signal, onInternalError, timeouts.refusedBodyDrainMs, storageLog, answers);
    inflight.add(handling);
    void handling.finally(() => inflight.delete(handling));
  };
  // A purge a stop interrupted is finished now; close() waits for it as for a request.
  const finishing = finishInterruptedPurges(deps).catch(onInternalError);
  inflight.add(finishing);
  void finishing.finally(() => inflight.delete(finishing));
  const server = httpServer(timeouts, onRequest);
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (options.onUpgrade?.(req, socket, head) !== true) socket.destroy();
  });
  const guard = new ConnectionGuard(server, {
    name: "--api-port",
    max: options.connectionsMax ?? apiLimits.connectionsMaxDefault,
    idleMs: timeouts.silentConnectionMs,
    clock,
    report: options.onConnectionsClosed ?? ((line) => console.error(`celld api: ${line}`)),
  });
  await listen(server, options.port ?? 0, options.host ?? "127.0.0.1");
  guard.startSweeping();
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    connections: guard.stats,
    close() {
      closing ??= (async () => {
        stopping.abort();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await Promise.allSettled([...inflight]);
        server.closeAllConnections();
        await closed;
        catalog.close();
      })();
      return closing;
    },
  };
}

/** What every route is given: the registry, the keys, the catalog and its queue directory, time, ids. */
function apiDeps(options: ApiServerOptions, clock: Clock, catalog: Catalog): ApiDeps {
  const deps: ApiDeps = {
    registry: options.registry,
    keys: options.keys,
    catalog,
    directory: new QueueDirectory(catalog, options.registry, clock, new UlidSource(), options.workerQueues),
    clock,
    ids: new UlidSource(),
    ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
    ...(options.addedConsumers === undefined ? {} : { addedConsumers: options.addedConsumers }),
  };
  // A queue's consumers stop before its cell closes for good: a dispatcher must not lease from it.
  if (options.addedConsumers !== undefined) deps.directory.beforeRemove = (name) => tellAddedConsumers(deps, name);
  return deps;
}

function serverTimeouts(given: Partial<ApiServerTimeouts> | undefined): ApiServerTimeouts {
  return {
    headersMs: apiLimits.headersTimeoutMs,
    requestMs: apiLimits.requestTimeoutMs,
    keepAliveMs: apiLimits.keepAliveTimeoutMs,
    checkIntervalMs: apiLimits.timeoutCheckIntervalMs,
    refusedBodyDrainMs: apiLimits.refusedBodyDrainMs,
    socketIdleMs: apiLimits.socketIdleTimeoutMs,
    silentConnectionMs: apiLimits.silentConnectionMs,
    ...given,
  };
}

/** The node:http server, its timeouts and header bound set, `onRequest` answering every request. */
function httpServer(timeouts: ApiServerTimeouts, onRequest: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer(
    {
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      keepAliveTimeout: timeouts.keepAliveMs,
      connectionsCheckingInterval: timeouts.checkIntervalMs,
      maxHeaderSize: apiLimits.headerBytesMax,
    },
    onRequest,
  );
  // Node answers `Expect: 100-continue` itself unless listened for, before the request's key or
  // size is looked at: a client would then upload a body only to be told 401 or 413.
  server.on("checkContinue", onRequest);
  // With no listener for "timeout", Node destroys the socket: the answer it held is dropped, and a
  // lease's afterWrite hands back the messages it carried.
  server.setTimeout(timeouts.socketIdleMs);
  answerParserErrors(server, apiLimits.headerBytesMax);
  return server;
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * One request to the native API, in stages: the paths outside the route table, the route,
 * access (key, environment, scope, names, query), the request's body, the call, the answer; any
 * throw becomes the error answer.
 */
async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  router: Router,
  deps: ApiDeps,
  stopping: AbortSignal,
  onInternalError: (error: unknown) => void,
  drainMs: number,
  storageLog: StorageFailureLog,
  answers: AnswerBudget,
): Promise<void> {
  const gone = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) gone.abort();
  });
  // The text of numbers the body's parse could not hold exactly, for the refusal to quote.
  const body: { read: boolean; inexactNumbers?: ReadonlyMap<string, string> } = { read: false };
  try {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname === metricsPath) return await answerMetrics(req, res, deps.metrics, deps.keys);
    if (url.pathname === keyPath) return answerKey(req, res, deps.keys);
    if (isDashboardPath(url.pathname)) return answerDashboard(req, res, url.pathname);
    const { route, params } = matchRoute(router, req.method ?? "", url.pathname);
    const { key, env } = checkAccess(req, url, route, params, deps.keys);
    const request = await readRequest(req, res, route, body);
    // Before the call does anything: no message is leased for an answer there is no room for.
    if (route.largeAnswer !== undefined) answers.checkRoom();
    const reply = await route.handle({
      params,
      env,
      query: url.searchParams,
      body: request.body,
      bodyText: request.bodyText,
      requestFormat: request.inFormat,
      responseFormat: request.outFormat,
      key,
      deps,
      clientGone: gone.signal,
      req,
      stopping,
      res,
    });
    await writeReply(res, route, reply, gone.signal, answers);
  } catch (thrown) {
    const error = quotedAsSent(toApiError(thrown), body.inexactNumbers);
    if (error.code === "internal") onInternalError(thrown);
    for (const failure of storageFailuresIn(thrown)) storageLog.report(failure);
    if (res.headersSent || res.destroyed) return;
    const headers = errorHeaders(error);
    if (hasBody(req) && !body.read) writeErrorAndClose(req, res, error, headers, { bytesMax: apiLimits.refusedBodyDrainBytesMax, ms: drainMs });
    else writeError(res, error, headers);
  }
}

/** A refused number past 2^53 - 1 quoted as its sender wrote it (fields.ts's one rule), when the body had it. */
function quotedAsSent(error: ApiError, inexactNumbers: ReadonlyMap<string, string> | undefined): ApiError {
  if (!(error instanceof InexactNumberError)) return error;
  const literal = inexactNumbers?.get(error.fieldName);
  return literal === undefined ? error : error.quoting(literal);
}

/** The route for a method and path, or not_found / method_not_allowed. */
function matchRoute(router: Router, method: string, path: string): { route: Route; params: Record<string, string> } {
  const match = router.match(method, path);
  if (match.kind === "none") throw new ApiError("not_found", `no route for ${method} ${path}`);
  if (match.kind === "method") {
    throw new ApiError("method_not_allowed", `${path} takes ${match.allowed.join(", ")}, not ${method}`, {
      extra: { allowed_methods: match.allowed },
    });
  }
  return { route: match.route, params: match.params };
}

/** The caller's key, allowed the route's scope in the environment the path names; names and query checked. */
function checkAccess(req: IncomingMessage, url: URL, route: Route, params: Record<string, string>, keys: ApiKeyStore) {
  const key = authenticate(req.headers.authorization, keys);
  const env = envName(params["org"]!, params["project"]!, params["env"]!);
  authorize(key, env, route.scope);
  checkSegment("org", params["org"]);
  checkSegment("project", params["project"]);
  checkSegment("env", params["env"]);
  checkQuery(url.searchParams, route.query ?? []);
  return { key, env };
}

/**
 * The formats the request comes in and its answer goes out in, and its body, read under its cap
 * and decoded (`body.read` set once it is read: a refusal before then drains it).
 */
async function readRequest(req: IncomingMessage, res: ServerResponse, route: Route, body: { read: boolean; inexactNumbers?: ReadonlyMap<string, string> }) {
  const speaksProtobuf = route.protobuf !== undefined;
  if (route.body !== "none") checkContentEncoding(req);
  const inFormat = route.body === "none" ? "json" : requestFormat(req, speaksProtobuf, route.body === "send");
  const outFormat = responseFormat(req, speaksProtobuf, inFormat);
  let value: unknown;
  let bodyText: string | undefined;
  if (route.body !== "none") {
    if (expectsContinue(req)) {
      // Everything that could refuse the call before its body has: only now is it asked for.
      checkDeclaredLength(req, bodyCaps[route.body]);
      res.writeContinue();
    }
    const bytes = await readBody(req, bodyCaps[route.body]);
    body.read = true;
    if (inFormat === "protobuf") value = decodeBody(route.protobuf!, bytes);
    else if (inFormat === "cloudevents-binary") value = bytes;
    // A send's events are checked for names given twice by json-source.ts, outside their data.
    else ({ value, text: bodyText, inexactNumbers: body.inexactNumbers } = parseJsonBody(bytes, { uniqueMembers: route.body === "control" }));
  }
  return { body: value, bodyText, inFormat, outFormat };
}

/** Writes the route's reply, unless its client has gone or (a withdrawable answer) there is no room. */
async function writeReply(res: ServerResponse, route: Route, reply: Reply, gone: AbortSignal, answers: AnswerBudget): Promise<void> {
  if (gone.aborted) {
    await reply.afterWrite?.(false);
    return;
  }
  if (route.largeAnswer === "withdrawable") {
    // Calls that passed the first check together (long polls among them) may have filled it
    // since: such an answer is not written, and a lease hands its messages back uncounted.
    try {
      answers.checkRoom();
    } catch (error) {
      await reply.afterWrite?.(false);
      throw error;
    }
  }
  const answer = answerOf(reply);
  answers.track(res, answer.body.byteLength);
  writeAnswer(res, reply.status ?? 200, answer);
  if (reply.afterWrite !== undefined) await reply.afterWrite(await delivered(res));
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? "/";
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}

function reportWhenAnswered(req: IncomingMessage, res: ServerResponse, tell: (request: AnsweredRequest) => void): void {
  const started = performance.now();
  res.once("finish", () => tell({ method: req.method ?? "", url: req.url ?? "", status: res.statusCode, durationMs: performance.now() - started }));
}

function answerOf(reply: Reply): Answer {
  if (reply.protobuf !== undefined) return protobufAnswer(reply.protobuf);
  return jsonAnswer(reply.jsonText ?? JSON.stringify(reply.json ?? {}));
}

function decodeBody(type: ProtoTypeName, bytes: Uint8Array): unknown {
  checkProtoBounds(type, bytes);
  try {
    return decodeProto(type, bytes);
  } catch {
    throw notAMessage(type);
  }
}

function errorHeaders(error: ApiError): Record<string, string> {
  const headers: Record<string, string> = {};
  if (error.code === "unauthenticated") headers["www-authenticate"] = 'Bearer realm="celld"';
  if (error.code === "method_not_allowed") headers["allow"] = (error.extra?.["allowed_methods"] as string[]).join(", ");
  if (error.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.retryAfterSeconds);
  // RFC 7694: the content codings a refused coded body could have been sent in.
  if (error.field === "Content-Encoding") headers["accept-encoding"] = "identity";
  return headers;
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined;
}
