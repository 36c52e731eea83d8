/**
 * A Worker route pattern as Cloudflare reads one (`example.com/*`, `*.example.com/api/*`,
 * `https://shop.example.com/`): `*` is the only operator and matches zero or more characters,
 * only at the start of the host or the end of the path; no query string. The specificity that
 * decides between two patterns matching one URL is Cloudflare's as workers-sdk reproduces it
 * (miniflare's `routeSpecificity`): host labels count 26 each and path segments 1, a leading
 * `*` label or a trailing `*` segment costing 2; a tie goes to the longer pattern. That formula
 * reproduces Cloudflare's documented surprises too: `example.com/images*` beats
 * `example.com/images/*` for `/images/hello`, and `a.example.com/*` beats `*.example.com/a`.
 */

export class RoutePatternError extends Error {
  readonly code = "ERR_ROUTE_PATTERN" as const;
  constructor(pattern: string, reason: string) {
    super(`route pattern ${JSON.stringify(pattern)} ${reason}`);
    this.name = "RoutePatternError [ERR_ROUTE_PATTERN]";
  }
}

export interface RoutePattern {
  /** As written in the config. */
  readonly pattern: string;
  /** Lowercase; for a leading wildcard, what the host must end with (`.example.com`); "" with anyHost. */
  readonly host: string;
  readonly hostWildcard: boolean;
  /** A lone `*` host: every host matches. */
  readonly anyHost: boolean;
  /** Starts with `/`; for a trailing wildcard, what the path and query must start with. */
  readonly path: string;
  readonly pathWildcard: boolean;
  readonly specificity: number;
}

const schemePrefix = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * Reads one pattern, or throws a RoutePatternError saying what Cloudflare would refuse. The
 * scheme, where one is written, is dropped: celld's `--port` speaks plain HTTP, with TLS (if any)
 * ended in front of it, so `https://` patterns must match the requests that arrive.
 */
export function parseRoutePattern(pattern: string): RoutePattern {
  const rest = pattern.trim().replace(schemePrefix, "");
  const slash = rest.indexOf("/");
  const hostPart = (slash === -1 ? rest : rest.slice(0, slash)).toLowerCase();
  const pathPart = slash === -1 ? "/" : rest.slice(slash);
  if (hostPart === "") throw new RoutePatternError(pattern, "has no host: write it as host/path, such as example.com/*");
  if (pathPart.includes("?")) throw new RoutePatternError(pattern, "has a query string, which a route cannot match on; end the path with * instead");
  if (/:\d*$/.test(hostPart) && !hostPart.startsWith("[")) {
    throw new RoutePatternError(pattern, "names a port; a route matches any port, so leave it out");
  }
  const anyHost = hostPart === "*";
  const hostWildcard = !anyHost && hostPart.startsWith("*");
  const host = anyHost ? "" : hostWildcard ? hostPart.slice(1) : hostPart;
  const pathWildcard = pathPart.endsWith("*");
  const path = pathWildcard ? pathPart.slice(0, -1) : pathPart;
  if (host.includes("*") || path.includes("*")) {
    throw new RoutePatternError(pattern, "has a * inside it; a route takes * only at the start of the host and the end of the path");
  }
  return { pattern, host, hostWildcard, anyHost, path, pathWildcard, specificity: specificityOf(hostPart, pathPart) };
}

function specificityOf(hostPart: string, pathPart: string): number {
  const labels = hostPart.split(".");
  const hostScore = labels.length - (labels[0] === "*" ? 2 : 0);
  const segments = pathPart.split("/");
  const pathScore = segments.length - (segments[segments.length - 1] === "*" ? 2 : 0);
  return hostScore * 26 + pathScore;
}

/** Whether a request for `hostname` (lowercase, no port) and `pathAndQuery` (from `/`) is the pattern's. */
export function routeMatches(route: RoutePattern, hostname: string, pathAndQuery: string): boolean {
  if (!route.anyHost) {
    if (route.hostWildcard ? !hostname.endsWith(route.host) : hostname !== route.host) return false;
  }
  return route.pathWildcard ? pathAndQuery.startsWith(route.path) : pathAndQuery === route.path;
}

/** Most specific first; a tie goes to the longer pattern (as workers-sdk), then to the one declared first. */
export function compareSpecificity(a: RoutePattern, b: RoutePattern): number {
  if (a.specificity !== b.specificity) return b.specificity - a.specificity;
  return b.pattern.length - a.pattern.length;
}

/** The host of a custom domain entry: a bare host name (wrangler refuses paths and wildcards there too). */
export function customDomainHost(pattern: string): string {
  const host = pattern.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, "").replace(/\/$/, "").toLowerCase();
  if (host === "" || host.includes("/") || host.includes("*") || host.includes(":")) {
    throw new RoutePatternError(pattern, "is a custom domain, which must be a bare host name such as shop.example.com (no path, port or *)");
  }
  return host;
}
