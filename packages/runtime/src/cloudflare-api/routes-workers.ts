import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DeployError } from "../deploy/deploy-errors.ts";
import { CloudflareError, cloudflareCodes } from "./cloudflare-errors.ts";
import { parseTailFilters } from "./tail-filter.ts";
import { tellAddedConsumers } from "./queues/added-consumers-of.ts";
import { deployLimits } from "../deploy/deploy-limits.ts";
import type { DeployService } from "../deploy/deploy-service.ts";
import { isVersionId } from "../deploy/deploy-names.ts";
import type { CloudflareContext, CloudflareReply, CloudflareRoute } from "./route.ts";
import { bindingsJson, deploymentJson, scriptJson, serviceJson, versionJson } from "./workers-json.ts";

/**
 * Workers scripts, versions, deployments, secrets and triggers: what `wrangler deploy`, `versions`,
 * `deployments`, `rollback`, `secret` and `delete` call (CLOUDFLARE-API-MAP.md §2.1–2.3), served by
 * the host's DeployService. A Worker unknown here is 10007 on every path that names it, which
 * wrangler reads as "first deploy" or "create a draft Worker".
 */

const scripts = "/accounts/{account}/workers/scripts";
const script = `${scripts}/{script}`;
const write = "workers:write" as const;
const read = "workers:read" as const;
/** A manifest of 20,000 paths with their hashes and sizes fits (about 150 bytes an entry). */
const assetSessionBodyBytesMax = 4 * 1024 * 1024;

export const workerRoutes: CloudflareRoute[] = [
  { method: "GET", path: "/accounts/{account}/workers/services/{script}", scope: read, body: "none", handle: getService },
  { method: "DELETE", path: "/accounts/{account}/workers/services/{script}", scope: write, body: "none", handle: deleteWorker },
  { method: "DELETE", path: script, scope: write, body: "none", handle: deleteWorker },
  { method: "GET", path: scripts, scope: read, body: "none", handle: listScripts },
  { method: "PUT", path: script, scope: write, body: "raw", bodyBytesMax: deployLimits.uploadBodyBytesMax, handle: (ctx) => upload(ctx, true) },
  { method: "POST", path: `${script}/versions`, scope: write, body: "raw", bodyBytesMax: deployLimits.uploadBodyBytesMax, handle: (ctx) => upload(ctx, false) },
  { method: "GET", path: `${script}/versions`, scope: read, body: "none", handle: listVersions },
  { method: "GET", path: `${script}/versions/{version}`, scope: read, body: "none", handle: getVersion },
  { method: "GET", path: `${script}/deployments`, scope: read, body: "none", handle: listDeployments },
  { method: "POST", path: `${script}/deployments`, scope: write, body: "json", handle: createDeployment },
  { method: "GET", path: `${script}/settings`, scope: read, body: "none", handle: getSettings },
  { method: "GET", path: `${script}/content/v2`, scope: read, body: "none", handle: getContent },
  { method: "GET", path: `${script}/script-settings`, scope: read, body: "none", handle: getScriptSettings },
  { method: "PATCH", path: `${script}/script-settings`, scope: write, body: "json", handle: patchScriptSettings },
  { method: "GET", path: `${script}/secrets`, scope: read, body: "none", handle: listSecrets },
  { method: "PUT", path: `${script}/secrets`, scope: write, body: "json", handle: putSecret },
  { method: "DELETE", path: `${script}/secrets/{secret}`, scope: write, body: "none", handle: deleteSecret },
  { method: "POST", path: `${script}/assets-upload-session`, scope: write, body: "json", bodyBytesMax: assetSessionBodyBytesMax, handle: openAssetsSession },
  {
    method: "POST",
    path: "/accounts/{account}/workers/assets/upload",
    scope: write,
    body: "raw",
    bodyBytesMax: deployLimits.uploadBodyBytesMax,
    // wrangler sends the upload session's token, not the API token: the session acts as the key that opened it.
    authenticate: (authorization, services) => {
      if (services.workers === undefined) throw new DeployError("script_not_found", "this celld runs no deployed Workers (start it with celld serve)");
      return services.workers.store.assetUploads.sessionKey(authorization);
    },
    handle: uploadAssets,
  },
  { method: "POST", path: `${script}/tails`, scope: read, body: "json", handle: createTail },
  { method: "DELETE", path: `${script}/tails/{tail}`, scope: read, body: "none", handle: deleteTail },
  { method: "GET", path: `${script}/references`, scope: read, body: "none", handle: references },
  { method: "GET", path: "/accounts/{account}/workers/tails/by-consumer/{script}", scope: read, body: "none", handle: async () => ({ result: [] }) },
  { method: "GET", path: "/accounts/{account}/storage/kv/namespaces", scope: read, body: "none", handle: kvNamespaces },
];

/**
 * celld keeps no registry of KV namespaces: a binding's namespace id names its storage, made on
 * first use. The list is empty, which is what `wrangler delete` reads it for (the Workers Sites
 * namespaces it would remove with the Worker).
 */
async function kvNamespaces(ctx: CloudflareContext): Promise<CloudflareReply> {
  workersService(ctx);
  return { result: [], resultInfo: { page: 1, per_page: 100, count: 0, total_count: 0, total_pages: 0 } };
}

/**
 * The host's deploy service. Only tokens of the Workers' environment (`celld serve --workers-env`)
 * reach it: a deployed Worker's queues are that environment's, which its deployer must see.
 */
export function workersService(ctx: CloudflareContext): DeployService {
  const workers = ctx.services.workers;
  if (workers === undefined) throw new DeployError("script_not_found", "this celld runs no deployed Workers (start it with celld serve)");
  const env = ctx.services.workersEnv;
  if (env !== undefined && ctx.env !== env) {
    throw new CloudflareError(
      403,
      cloudflareCodes.permission,
      `Unauthorized to access requested resource: this celld serve runs the Workers of ${env} (--workers-env), and this token is for ${ctx.env}`,
    );
  }
  return workers;
}

/** The service, and the Worker named in the path, which must exist (else 10007). */
export function existingWorker(ctx: CloudflareContext): { workers: DeployService; name: string } {
  const workers = workersService(ctx);
  const name = ctx.params.script!;
  workers.requireScript(name);
  return { workers, name };
}

async function getService(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  return { result: serviceJson(workers.store, name) };
}

async function listScripts(ctx: CloudflareContext): Promise<CloudflareReply> {
  const workers = workersService(ctx);
  const names = workers.store.scripts();
  return { result: names.map((name) => scriptJson(workers.store, name)) };
}

async function upload(ctx: CloudflareContext, deploy: boolean): Promise<CloudflareReply> {
  const workers = workersService(ctx);
  const name = ctx.params.script!;
  const started = performance.now();
  const { version, deployment, warnings } = await workers.upload(name, ctx.bytes ?? new Uint8Array(), ctx.req.headers["content-type"], {
    deploy,
    annotations: {},
  });
  const startupTimeMs = Math.round(performance.now() - started);
  const messages = warnings.map((message) => ({ code: 10000, message }));
  if (!deploy) return { result: { ...versionJson(version), startup_time_ms: startupTimeMs }, messages };
  return {
    result: {
      ...scriptJson(workers.store, name),
      deployment_id: version.id,
      startup_time_ms: startupTimeMs,
      ...(deployment === undefined ? {} : { deployment: deploymentJson(deployment) }),
    },
    messages,
  };
}

async function listVersions(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  return { result: { items: workers.store.versions(name).map((v) => versionJson(v)) } };
}

async function getVersion(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const id = ctx.params.version!;
  if (!isVersionId(id)) throw new DeployError("version_not_found", `version id ${JSON.stringify(id)} is not a version id`);
  return { result: versionJson(workers.store.version(name, id), workers.store.secretNames(name)) };
}

async function listDeployments(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  return { result: { deployments: workers.store.deployments(name).map(deploymentJson) } };
}

/** One version at 100%: gradual deployments (a split between two versions) are not served. */
async function createDeployment(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const body = (ctx.body ?? {}) as { strategy?: unknown; versions?: unknown; annotations?: unknown };
  const versions = Array.isArray(body.versions) ? (body.versions as { version_id?: unknown; percentage?: unknown }[]) : [];
  const whole = versions.filter((v) => v.percentage === 100);
  if (versions.length !== 1 || whole.length !== 1 || typeof whole[0]!.version_id !== "string") {
    throw new DeployError(
      "invalid_request",
      `versions must name exactly one version at percentage 100, got ${JSON.stringify(body.versions ?? null)}: celld does not serve gradual deployments`,
    );
  }
  const annotations = isStringRecord(body.annotations) ? body.annotations : {};
  const deployment = await workers.deploy(name, whole[0]!.version_id as string, annotations);
  return { result: deploymentJson(deployment) };
}

async function getSettings(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const active = workers.store.active(name)?.version ?? workers.store.versions(name)[0];
  return {
    result: {
      bindings: bindingsJson(active?.bindings ?? [], workers.store.secretNames(name)),
      compatibility_date: active?.compatibilityDate,
      compatibility_flags: active?.compatibilityFlags ?? [],
      logpush: false,
      tags: [],
      tail_consumers: [],
      usage_model: "standard",
    },
  };
}

/**
 * A version's modules as uploaded (`?version=`, else the active one's), multipart with the main
 * module named in `cf-entrypoint`: what `wrangler versions secret put` copies into a new version.
 */
async function getContent(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const id = ctx.query.get("version");
  if (id !== null && !isVersionId(id)) throw new DeployError("version_not_found", `version id ${JSON.stringify(id)} is not a version id`);
  const version = id === null ? (workers.store.active(name)?.version ?? workers.store.versions(name)[0]!) : workers.store.version(name, id);
  const dir = workers.store.modulesDir(name, version.id);
  const form = new FormData();
  for (const module of version.modules) {
    form.append(module.name, new File([readFileSync(join(dir, module.name))], module.name, { type: module.contentType }), module.name);
  }
  const encoded = new Response(form);
  return {
    result: null,
    raw: { type: encoded.headers.get("content-type")!, body: new Uint8Array(await encoded.arrayBuffer()) },
    headers: { "cf-entrypoint": version.mainModule },
  };
}

/** What celld keeps of script settings: none (see patchScriptSettings). */
async function getScriptSettings(ctx: CloudflareContext): Promise<CloudflareReply> {
  existingWorker(ctx);
  return { result: { logpush: false, tail_consumers: [], observability: { enabled: false } } };
}

/** Observability, logpush, tags, tail consumers: accepted and not acted on (said in messages). */
async function patchScriptSettings(ctx: CloudflareContext): Promise<CloudflareReply> {
  existingWorker(ctx);
  return {
    result: ctx.body ?? {},
    messages: [{ code: 10000, message: "celld keeps no script settings (observability, logpush, tags, tail consumers): nothing changed" }],
  };
}

async function listSecrets(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  return { result: workers.store.secretNames(name).map((secret) => ({ name: secret, type: "secret_text" })) };
}

async function putSecret(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const body = ctx.body as { name?: unknown; text?: unknown; type?: unknown };
  if (typeof body.name !== "string") throw new DeployError("invalid_request", `name must be a string, got ${JSON.stringify(body.name ?? null)}`);
  if (body.type !== undefined && body.type !== "secret_text") {
    throw new DeployError("invalid_request", `type ${JSON.stringify(body.type)} is not served: celld keeps secret_text secrets`);
  }
  if (typeof body.text !== "string") throw new DeployError("invalid_request", `text must be a string (the secret's value)`);
  await workers.putSecret(name, body.name, body.text);
  return { result: { name: body.name, type: "secret_text" } };
}

async function deleteSecret(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  const secret = ctx.params.secret!;
  if (!(await workers.deleteSecret(name, secret))) throw new DeployError("invalid_request", `Worker "${name}" has no secret "${secret}"`);
  return { result: null };
}

/** The Worker's queue consumers go with it, as on Cloudflare (its queues and their messages stay). */
async function deleteWorker(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { workers, name } = existingWorker(ctx);
  await workers.deleteScript(name);
  const { catalog } = ctx.deps;
  const consumers = catalog.allConsumers().filter((c) => c.type === "worker" && c.script === name);
  for (const consumer of consumers) catalog.deleteConsumer(consumer.queue, consumer.consumerId);
  if (consumers.length > 0) await tellAddedConsumers(ctx.deps);
  return { result: null };
}

/**
 * wrangler opens an assets upload session before it uploads a Worker with `assets` (the Worker
 * need not exist yet): the hashes this host lacks, in buckets, and the token to upload them with.
 */
async function openAssetsSession(ctx: CloudflareContext): Promise<CloudflareReply> {
  const workers = workersService(ctx);
  return { result: workers.store.assetUploads.openSession(ctx.params.script!, ctx.key, ctx.body) };
}

/** One bucket of files, base64 in a multipart form; the last answers the completion token. */
async function uploadAssets(ctx: CloudflareContext): Promise<CloudflareReply> {
  const workers = workersService(ctx);
  if (ctx.query.get("base64") !== "true") throw new DeployError("invalid_upload", "base64 must be true: celld takes asset files base64-encoded, as wrangler sends them");
  const result = await workers.store.assetUploads.upload(ctx.req.headers.authorization, ctx.bytes ?? new Uint8Array(), ctx.req.headers["content-type"]);
  return { status: result.jwt === undefined ? 202 : 201, result };
}

/**
 * `wrangler tail`: a session whose WebSocket (on this API port) gets the Worker's trace events
 * (cloudflare-api/tail-sessions.ts), filtered by what wrangler sends in the body (tail-filter.ts).
 */
async function createTail(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { name } = existingWorker(ctx);
  const tails = ctx.services.tails;
  if (tails === undefined) throw new DeployError("invalid_request", "this celld does not serve wrangler tail (start it with celld serve)");
  const host = ctx.req.headers.host;
  if (host === undefined) throw new DeployError("invalid_request", "a Host header is needed to say where the tail's WebSocket is");
  const filter = parseTailFilters(ctx.body, ctx.req.socket.remoteAddress);
  return { result: tails.create(name, `http://${host}`, filter) };
}

async function deleteTail(ctx: CloudflareContext): Promise<CloudflareReply> {
  const { name } = existingWorker(ctx);
  const id = ctx.params.tail!;
  if (ctx.services.tails?.has(name, id) !== true) throw new DeployError("version_not_found", `Worker "${name}" has no tail ${id}`);
  ctx.services.tails.remove(id);
  return { result: null };
}

/** What else depends on the Worker: celld tracks no such references, so nothing blocks a delete. */
async function references(ctx: CloudflareContext): Promise<CloudflareReply> {
  existingWorker(ctx);
  return { result: { services: { incoming: [] }, durable_objects: [], dispatch_outbounds: [] } };
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.values(value).every((v) => typeof v === "string");
}
