import { hostnameOf } from "../front/worker-router.ts";
import { DeployError } from "../deploy/deploy-errors.ts";
import type { R2Bucket } from "../deploy/r2-bucket-list.ts";
import { CloudflareError } from "./cloudflare-errors.ts";
import type { CloudflareContext, CloudflareReply, CloudflareRoute } from "./route.ts";
import { routeJson } from "./routes-workers-triggers.ts";
import { workersService } from "./routes-workers.ts";

/**
 * The zone and R2 look-ups `wrangler deploy` makes around an upload (CLOUDFLARE-API-MAP.md §2.1):
 *
 * - Zones: celld keeps no DNS, and `--port` answers whatever host a request names, so every host
 *   name is a zone of the account. A zone's id is its name in hex (no table to keep), and its
 *   Workers routes are the deployed Workers' routes on it: wrangler reads them to refuse a route
 *   another Worker has.
 * - R2: the host's bucket list (deploy/r2-bucket-list.ts). wrangler asks for a bound bucket and
 *   creates it when it is missing (10006), as on Cloudflare.
 */

const read = "workers:read" as const;
const write = "workers:write" as const;
const buckets = "/accounts/{account}/r2/buckets";

/** Cloudflare R2's codes: no such bucket, and a bucket that exists already. */
const r2Codes = { bucketNotFound: 10006, bucketExists: 10004 } as const;

export const zoneAndR2Routes: CloudflareRoute[] = [
  { method: "GET", path: "/zones", scope: read, body: "none", handle: listZones },
  { method: "GET", path: "/zones/{zone}/workers/routes", scope: read, body: "none", handle: zoneRoutes },
  { method: "GET", path: buckets, scope: read, body: "none", handle: listBuckets },
  { method: "POST", path: buckets, scope: write, body: "json", handle: createBucket },
  { method: "GET", path: `${buckets}/{bucket}`, scope: read, body: "none", handle: getBucket },
];

const hostPattern = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/;

async function listZones(ctx: CloudflareContext): Promise<CloudflareReply> {
  workersService(ctx);
  const name = ctx.query.get("name")?.toLowerCase();
  const account = ctx.query.get("account.id");
  if (name === undefined || !hostPattern.test(name) || (account !== null && account !== ctx.account)) return { result: [] };
  return {
    result: [{ id: Buffer.from(name).toString("hex"), name, status: "active", type: "full", account: { id: ctx.account, name: ctx.account } }],
  };
}

async function zoneRoutes(ctx: CloudflareContext): Promise<CloudflareReply> {
  const workers = workersService(ctx);
  const zone = /^(?:[0-9a-f]{2})+$/.test(ctx.params.zone!) ? Buffer.from(ctx.params.zone!, "hex").toString() : "";
  if (!hostPattern.test(zone)) throw new CloudflareError(404, 1001, `Invalid zone identifier: ${ctx.params.zone}`);
  const inZone = (pattern: string): boolean => {
    const host = hostnameOf(pattern.replace(/^https?:\/\//, "").split("/")[0]!.replace(/^\*\.?/, ""));
    return host === zone || host.endsWith(`.${zone}`);
  };
  const routes = workers.store.scripts().flatMap((script) =>
    workers.store.settings(script).routes.filter(inZone).map((pattern) => routeJson(pattern, script)),
  );
  return { result: routes };
}

function bucketJson(bucket: R2Bucket): Record<string, unknown> {
  return { name: bucket.name, creation_date: bucket.createdOn, location: "local", storage_class: "Standard" };
}

function bucketList(ctx: CloudflareContext) {
  workersService(ctx);
  const list = ctx.services.r2Buckets;
  if (list === undefined) throw new DeployError("script_not_found", "this celld keeps no R2 buckets (start it with celld serve)");
  return list;
}

async function listBuckets(ctx: CloudflareContext): Promise<CloudflareReply> {
  return { result: { buckets: bucketList(ctx).list().map(bucketJson) } };
}

async function getBucket(ctx: CloudflareContext): Promise<CloudflareReply> {
  const bucket = bucketList(ctx).get(ctx.params.bucket!);
  if (bucket === undefined) throw new CloudflareError(404, r2Codes.bucketNotFound, `The specified bucket does not exist: ${ctx.params.bucket}`);
  return { result: bucketJson(bucket) };
}

async function createBucket(ctx: CloudflareContext): Promise<CloudflareReply> {
  const list = bucketList(ctx);
  const name = (ctx.body as { name?: unknown }).name;
  if (typeof name !== "string") throw new DeployError("invalid_request", `name must be a string, got ${JSON.stringify(name ?? null)}`);
  if (list.get(name) !== undefined) throw new CloudflareError(409, r2Codes.bucketExists, `The bucket you tried to create already exists: ${name}`);
  return { result: bucketJson(list.create(name)) };
}
