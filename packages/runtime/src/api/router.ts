import type { AddedConsumers } from "../plugins/added-consumers.ts";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { QueueCells, Clock, UlidSource } from "@celld/queue-cell";
import type { MetricsEndpoint } from "../metrics/metrics-endpoint.ts";
import type { ApiKeyInfo, ApiKeyStore, ApiScope } from "./api-keys.ts";
import type { Catalog } from "./catalog.ts";
import { ApiError } from "../wire/api-error.ts";
import type { RequestFormat, WireFormat } from "./http-io.ts";
import type { ProtoTypeName } from "../wire/proto-codec.ts";
import type { QueueDirectory } from "./queue-directory.ts";

export interface ApiDeps {
  registry: QueueCells;
  keys: ApiKeyStore;
  catalog: Catalog;
  directory: QueueDirectory;
  clock: Clock;
  ids: UlidSource;
  /** The host's metrics, when it keeps them (`GET /metrics`). */
  metrics?: MetricsEndpoint;
  /** Where the consumers added through the API reach the host that runs them, when one does. */
  addedConsumers?: AddedConsumers;
}

export interface RouteContext {
  /** Path parameters, percent-decoded (not yet checked beyond the route's shape). */
  params: Record<string, string>;
  /** `orgs/{org}/projects/{project}/envs/{env}` of the path. */
  env: string;
  query: URLSearchParams;
  /**
   * The parsed JSON body, or the decoded protobuf message of the route's request type; the bytes
   * of a binary-mode CloudEvent's body.
   */
  body: unknown;
  /** The JSON body's text, where a send finds each event's data as its sender wrote it. */
  bodyText: string | undefined;
  requestFormat: RequestFormat;
  responseFormat: WireFormat;
  key: ApiKeyInfo;
  deps: ApiDeps;
  /** Aborts when the client goes away before the answer is written. */
  clientGone: AbortSignal;
  /** For its headers: a binary-mode CloudEvent carries its attributes there. */
  req: IncomingMessage;
  /** Aborts when the server is shutting down: long polls answer at once. */
  stopping: AbortSignal;
  res: ServerResponse;
}

export interface Reply {
  status?: number;
  json?: unknown;
  /** JSON already written: answers that carry stored event data, which is never parsed again. */
  jsonText?: string;
  protobuf?: Uint8Array;
  /** Told whether the answer reached the connection: a lease nacks what it could not hand over. */
  afterWrite?: (delivered: boolean) => Promise<void>;
}

/**
 * `send`: a send or publish body, which may also be CloudEvents in the HTTP binding's modes;
 * `control`: any other body; `none`: the route reads no body.
 */
export type BodyKind = "none" | "control" | "send";

export interface Route {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** `/v1/orgs/{org}/projects/{project}/envs/{env}/queues/{queue}:send` */
  path: string;
  scope: ApiScope;
  body: BodyKind;
  /** The protobuf request type, for routes that speak protobuf as well as JSON. */
  protobuf?: ProtoTypeName;
  /** Query parameters the route takes; any other is refused. */
  query?: readonly string[];
  /**
   * Its answer can be megabytes (message data, a page of 100 subscriptions of long patterns, a
   * publish's deliveries): refused before it runs while the answers the server's clients have not
   * read yet fill apiLimits.answerBytesPendingMax (answer-budget.ts). `withdrawable`: the call only
   * reads, or hands back what it leased, so its answer once built is refused too if it does not fit;
   * `committed`: the call has taken effect by then, and its answer is written whatever its size.
   */
  largeAnswer?: "withdrawable" | "committed";
  handle: (ctx: RouteContext) => Promise<Reply>;
}

/** What the router matches on: the native routes, and the Cloudflare adapter's (../cloudflare-api). */
export interface RoutePattern {
  method: string;
  /** Literal text and `{param}` segments (lowercase names); a param matches no `/` and no `:`. */
  path: string;
  scope: unknown;
}

type CompiledRoute<R> = R & {
  pattern: RegExp;
  names: string[];
};

export type RouteMatch<R extends RoutePattern = Route> =
  | { kind: "found"; route: R; params: Record<string, string> }
  | { kind: "method"; allowed: string[] }
  | { kind: "none" };

export class Router<R extends RoutePattern = Route> {
  private readonly routes: CompiledRoute<R>[];

  constructor(routes: readonly R[]) {
    this.routes = routes.map((route) => {
      const names: string[] = [];
      const source = route.path
        .split(/(\{[a-z]+\})/)
        .map((part) => {
          const param = /^\{([a-z]+)\}$/.exec(part);
          if (param === null) return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
          names.push(param[1]!);
          return "([^/:]+)";
        })
        .join("");
      return { ...route, pattern: new RegExp(`^${source}$`), names };
    });
  }

  match(method: string, path: string): RouteMatch<R> {
    const allowed: string[] = [];
    for (const route of this.routes) {
      const m = route.pattern.exec(path);
      if (m === null) continue;
      if (route.method !== method) {
        allowed.push(route.method);
        continue;
      }
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => (params[name] = decodeSegment(name, m[i + 1]!)));
      return { kind: "found", route, params };
    }
    return allowed.length > 0 ? { kind: "method", allowed } : { kind: "none" };
  }

  list(): ReadonlyArray<Pick<R, "method" | "path" | "scope">> {
    return this.routes.map(({ method, path, scope }) => ({ method, path, scope }));
  }
}

function decodeSegment(name: string, raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new ApiError("invalid_argument", `the ${name} in the path is not valid percent-encoding`, { field: name });
  }
}
