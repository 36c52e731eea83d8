import { CronExpressionError, parseCron } from "../config/cron/cron-expression.ts";
import { RoutePatternError, customDomainHost, parseRoutePattern } from "../config/route-pattern.ts";
import { DeployError } from "../deploy/deploy-errors.ts";
import type { CloudflareContext, CloudflareReply, CloudflareRoute } from "./route.ts";
import { existingWorker, workersService } from "./routes-workers.ts";

/**
 * A Worker's triggers: what wrangler's trigger step sets after an upload (CLOUDFLARE-API-MAP.md
 * §2.1): cron schedules, the workers.dev switch, routes and custom domains. Each is replaced whole
 * and kept in the Worker's settings; the running Worker restarts when one changed, and `--port`
 * routes by them (front/worker-router.ts).
 */

const script = "/accounts/{account}/workers/scripts/{script}";
const write = "workers:write" as const;
const read = "workers:read" as const;

export const workerTriggerRoutes: CloudflareRoute[] = [
  { method: "GET", path: "/accounts/{account}/workers/subdomain", scope: read, body: "none", handle: accountSubdomain },
  { method: "GET", path: `${script}/subdomain`, scope: read, body: "none", handle: getSubdomain },
  { method: "POST", path: `${script}/subdomain`, scope: write, body: "json", handle: setSubdomain },
  { method: "GET", path: `${script}/schedules`, scope: read, body: "none", handle: getSchedules },
  { method: "PUT", path: `${script}/schedules`, scope: write, body: "json", handle: putSchedules },
  { method: "GET", path: `${script}/routes`, scope: read, body: "none", handle: getRoutes },
  { method: "PUT", path: `${script}/routes`, scope: write, body: "json", handle: putRoutes },
  { method: "POST", path: `${script}/domains/changeset`, scope: write, body: "json", handle: domainsChangeset },
  { method: "PUT", path: `${script}/domains/records`, scope: write, body: "json", handle: putDomains },
];

/** The account's workers.dev name: its id. A Worker answers as `<name>.localhost` on --port. */
async function accountSubdomain(ctx: CloudflareContext): Promise<CloudflareReply> {
  workersService(ctx);
  return { result: { subdomain: ctx.account } };
}

async function getSubdomain(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  return { result: { enabled: workers.store.settings(name).workersDev, previews_enabled: false } };
}

async function setSubdomain(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const enabled = (ctx.body as { enabled?: unknown }).enabled;
  if (typeof enabled !== "boolean") throw new DeployError("invalid_request", `enabled must be true or false, got ${JSON.stringify(enabled ?? null)}`);
  const settings = await workers.setTriggers(name, { workersDev: enabled });
  return { result: { enabled: settings.workersDev, previews_enabled: false } };
}

async function getSchedules(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const settings = workers.store.settings(name);
  return { result: { schedules: settings.schedules.map((cron) => ({ cron, created_on: settings.modifiedOn, modified_on: settings.modifiedOn })) } };
}

async function putSchedules(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const crons = arrayBody(ctx, '{"cron": "<expression>"}').map((entry, i) => {
    const cron = (entry as { cron?: unknown } | null)?.cron;
    if (typeof cron !== "string") throw new DeployError("invalid_request", `[${i}].cron must be a string, got ${JSON.stringify(cron ?? null)}`);
    try {
      parseCron(cron);
    } catch (error) {
      if (!(error instanceof CronExpressionError)) throw error;
      throw new DeployError("invalid_request", `[${i}].cron: ${error.message}`);
    }
    return cron;
  });
  await workers.setTriggers(name, { schedules: [...new Set(crons)] });
  return getSchedules(ctx);
}

async function getRoutes(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  return { result: workers.store.settings(name).routes.map((pattern) => routeJson(pattern, name)) };
}

/** `[{"pattern": "api.example.com/*", "zone_name": "example.com"}]`: the Worker's routes, replaced whole. */
async function putRoutes(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const patterns = arrayBody(ctx, '{"pattern": "<host/path>"}').map((entry, i) => {
    const pattern = (entry as { pattern?: unknown } | null)?.pattern;
    if (typeof pattern !== "string") throw new DeployError("invalid_request", `[${i}].pattern must be a string, got ${JSON.stringify(pattern ?? null)}`);
    return checkedPattern(`[${i}].pattern`, pattern);
  });
  const settings = await workers.setTriggers(name, { routes: [...new Set(patterns)] });
  return { result: settings.routes.map((pattern) => routeJson(pattern, name)) };
}

/** Asked only from a terminal, before the PUT: celld has no DNS records, so nothing conflicts but another Worker's domain, which the PUT refuses. */
async function domainsChangeset(ctx: CloudflareContext): Promise<CloudflareReply> {
  existingWorker(ctx);
  const origins = arrayBody(ctx, '{"hostname": "<host>"}');
  return { result: { added: origins, removed: [], updated: [], conflicting: [] } };
}

/** `{"origins": [{"hostname": "shop.example.com"}], ...}`: the Worker's custom domains, replaced whole. */
async function putDomains(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const origins = (ctx.body as { origins?: unknown }).origins;
  if (!Array.isArray(origins)) throw new DeployError("invalid_request", `origins must be an array of {"hostname": "<host>"}, got ${JSON.stringify(origins ?? null)}`);
  const hosts = origins.map((origin: unknown, i) => {
    const hostname = (origin as { hostname?: unknown } | null)?.hostname;
    if (typeof hostname !== "string") throw new DeployError("invalid_request", `origins[${i}].hostname must be a string, got ${JSON.stringify(hostname ?? null)}`);
    return customDomainHost(checkedPattern(`origins[${i}].hostname`, hostname));
  });
  const settings = await workers.setTriggers(name, { customDomains: [...new Set(hosts)] });
  return { result: settings.customDomains.map((hostname) => ({ hostname, service: name, environment: "production" })) };
}

function checkedPattern(field: string, pattern: string): string {
  try {
    parseRoutePattern(pattern);
  } catch (error) {
    if (!(error instanceof RoutePatternError)) throw error;
    throw new DeployError("invalid_request", `${field}: ${error.message}`);
  }
  return pattern;
}

function arrayBody(ctx: CloudflareContext, item: string): unknown[] {
  if (!Array.isArray(ctx.body)) throw new DeployError("invalid_request", `the body must be an array of ${item}`);
  return ctx.body as unknown[];
}

export function routeJson(pattern: string, script: string): Record<string, unknown> {
  return { id: routeId(pattern), pattern, script };
}

/** Stable, so a route keeps its id across the PUTs that replace a Worker's routes. */
function routeId(pattern: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < pattern.length; i++) h = Math.imul(h ^ pattern.charCodeAt(i), 0x01000193) >>> 0;
  return `${h.toString(16).padStart(8, "0")}${Buffer.from(pattern).toString("hex").slice(0, 24).padEnd(24, "0")}`;
}
