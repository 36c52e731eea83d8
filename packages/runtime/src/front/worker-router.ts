import { compareSpecificity, customDomainHost, parseRoutePattern, routeMatches, type RoutePattern } from "../config/route-pattern.ts";

/** A Worker's `route` / `routes` entry, as the config model holds it. */
export interface WorkerRoute {
  pattern: string;
  /** A custom domain: the whole host, every path; routes on the same host take precedence. */
  customDomain: boolean;
}

export interface RoutedWorker {
  name: string;
  routes: readonly WorkerRoute[];
  /** `workers_dev = false`: no `<name>.localhost` host; unset or true: it has one. */
  workersDev?: boolean;
}

export interface WorkerRouterOptions {
  /** In deployment order: the first takes every request nothing else claims. */
  workers: readonly RoutedWorker[];
  /** `--workers-dev-domain`: `<worker>.<domain>` goes to that Worker, as `<worker>.localhost` does. */
  workersDevDomain?: string;
}

/** Why a request went where it did (docs/routing.md has the order). */
export type RouteReason = "worker-host" | "route" | "custom-domain" | "first-worker" | "workers-dev-off";

/** "workers-dev-off": the name host of a Worker with `workers_dev = false`, which nothing else claims: not found. */
export interface RouteChoice {
  worker: string;
  reason: RouteReason;
}

interface CompiledRoute {
  worker: string;
  route: RoutePattern;
}

/**
 * Which Worker of a deployment answers a request on `--port`, from its Host and path. In order:
 *   1. Host `<worker>.localhost` or `<worker>.<workersDevDomain>` (any port): that Worker.
 *   2. The most specific `routes` pattern matching host and path (route-pattern.ts).
 *   3. A custom domain equal to the host.
 *   4. The first Worker.
 * A Worker with `workers_dev = false` has no name host: a request for it that no route or custom
 * domain claims is not found (as Cloudflare's disabled workers.dev URL), not sent to the first Worker.
 * Built once per deployment; `celld dev` and `celld serve` both route through it.
 */
export class WorkerRouter {
  readonly #first: string;
  readonly #byHost = new Map<string, string>();
  /** The name hosts' prefixes of Workers with `workers_dev = false`. */
  readonly #hidden = new Map<string, string>();
  readonly #routes: CompiledRoute[] = [];
  readonly #customDomains = new Map<string, string>();
  readonly #suffixes: string[];

  /** Throws a RoutePatternError (naming the pattern) for a pattern Cloudflare would refuse. */
  constructor(options: WorkerRouterOptions) {
    const first = options.workers[0];
    if (first === undefined) throw new Error("a deployment has at least one Worker");
    this.#first = first.name;
    const domain = options.workersDevDomain?.toLowerCase().replace(/^\.+|\.+$/g, "");
    this.#suffixes = domain === undefined || domain === "" ? [".localhost"] : [".localhost", `.${domain}`];
    for (const worker of options.workers) {
      (worker.workersDev === false ? this.#hidden : this.#byHost).set(worker.name.toLowerCase(), worker.name);
      for (const route of worker.routes) {
        if (route.customDomain) this.#customDomains.set(customDomainHost(route.pattern), worker.name);
        else this.#routes.push({ worker: worker.name, route: parseRoutePattern(route.pattern) });
      }
    }
    // Array.prototype.sort is stable: an exact tie keeps deployment order.
    this.#routes.sort((a, b) => compareSpecificity(a.route, b.route));
  }

  /**
   * `hostHeader` as the client sent it (a port, IPv6 brackets, upper case are all fine);
   * `target` the request line's target (`/path?query`, or an absolute URL from a proxy).
   */
  route(hostHeader: string | undefined, target: string): RouteChoice {
    const hostname = hostnameOf(hostHeader);
    const byName = this.#workerHost(hostname, this.#byHost);
    if (byName !== undefined) return { worker: byName, reason: "worker-host" };
    if (this.#routes.length > 0) {
      const pathAndQuery = pathAndQueryOf(target);
      for (const { worker, route } of this.#routes) {
        if (routeMatches(route, hostname, pathAndQuery)) return { worker, reason: "route" };
      }
    }
    const custom = this.#customDomains.get(hostname);
    if (custom !== undefined) return { worker: custom, reason: "custom-domain" };
    const hidden = this.#workerHost(hostname, this.#hidden);
    if (hidden !== undefined) return { worker: hidden, reason: "workers-dev-off" };
    return { worker: this.#first, reason: "first-worker" };
  }

  /** The host names that reach `worker` by name, for the start banner. */
  workerHosts(worker: string): string[] {
    if (this.#hidden.has(worker.toLowerCase())) return [];
    return this.#suffixes.map((suffix) => `${worker.toLowerCase()}${suffix}`);
  }

  #workerHost(hostname: string, names: ReadonlyMap<string, string>): string | undefined {
    for (const suffix of this.#suffixes) {
      if (hostname.length > suffix.length && hostname.endsWith(suffix)) {
        const name = names.get(hostname.slice(0, -suffix.length));
        if (name !== undefined) return name;
      }
    }
    return undefined;
  }
}

/** Lowercase host without port or trailing dot; "" when absent. */
export function hostnameOf(hostHeader: string | undefined): string {
  if (hostHeader === undefined) return "";
  let host = hostHeader.trim().toLowerCase();
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    return end === -1 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(":");
  if (colon !== -1) host = host.slice(0, colon);
  return host.endsWith(".") ? host.slice(0, -1) : host;
}

/** The path and query of a request target, normalised as a URL parser would (`/a/../b` is `/b`). */
export function pathAndQueryOf(target: string): string {
  try {
    const url = new URL(target, "http://h");
    return url.pathname + url.search;
  } catch {
    return target;
  }
}
