import { dirname, join } from "node:path";
import { supportedCompatibilityDate, type ModuleDefinition, type WorkerOptions } from "miniflare";
import type { WorkerBundle } from "../bundle/bundle.ts";
import type { AbsentWorkers } from "./absent-workers.ts";
import type { AssetsConfig, WorkerConfig } from "../config/index.ts";
import { runtimeCompatibilityFlags } from "../config/nodejs-compat.ts";
import { installAssetsWiring } from "../workerd/miniflare-assets-wiring.ts";

/**
 * A Worker's own Miniflare options: its bundled code, compatibility settings and the bindings
 * Miniflare implements itself (vars, KV, D1, R2, Durable Objects, services). Storage for them is
 * persisted under the host's data directory through Miniflare's `defaultPersistRoot`.
 */
export function workerOptions(
  worker: WorkerConfig,
  bundle: WorkerBundle,
  warn: (message: string) => void,
  absent: AbsentWorkers,
): WorkerOptions {
  const compatibility = runnableCompatibility(worker, warn);
  return {
    name: worker.name,
    ...workerCode(worker, bundle),
    ...compatibility,
    bindings: worker.vars as Record<string, never>,
    kvNamespaces: Object.fromEntries(worker.kvNamespaces.map((kv) => [kv.binding, kv.id])),
    d1Databases: Object.fromEntries(worker.d1Databases.map((d1) => [d1.binding, d1.databaseId])),
    r2Buckets: Object.fromEntries(worker.r2Buckets.map((r2) => [r2.binding, r2.bucketName])),
    ...durableObjectOptions(worker, absent),
    ...(worker.assets === undefined ? {} : { assets: assetsOptions(worker.assets) }),
    serviceBindings: Object.fromEntries(worker.services.map((s) => [s.binding, absent.service(s)])),
  };
}

/**
 * Durable Object bindings, and each class the Worker's migrations leave with its storage backend,
 * as `wrangler dev` passes them. Miniflare takes a class's backend from any entry that names it
 * (a binding or an unbound class) and refuses two that disagree, so it is set only on this
 * Worker's own classes: a binding into another Worker (`script_name`) leaves it to that Worker's
 * entries. A bound class no migration creates stays KV-backed, as under wrangler dev.
 */
function durableObjectOptions(worker: WorkerConfig, absent: AbsentWorkers): Pick<WorkerOptions, "durableObjects" | "additionalUnboundDurableObjects"> {
  const sqlite = new Map(worker.durableObjectClasses.map((c) => [c.className, c.storage === "sqlite"]));
  const own = (scriptName: string | undefined) => scriptName === undefined || scriptName === worker.name;
  const bound = new Set(worker.durableObjects.filter((d) => own(d.scriptName)).map((d) => d.className));
  return {
    durableObjects: Object.fromEntries(
      worker.durableObjects.map((d) => [
        d.name,
        absent.durableObject(worker.name, d.name) ?? {
          className: d.className,
          ...(d.scriptName === undefined ? {} : { scriptName: d.scriptName }),
          ...(own(d.scriptName) && sqlite.has(d.className) ? { useSQLite: sqlite.get(d.className) } : {}),
        },
      ]),
    ),
    // A class with no binding here still needs its backend: for a binding from another Worker
    // (script_name), and for ctx.exports.
    additionalUnboundDurableObjects: [...sqlite]
      .filter(([className]) => !bound.has(className))
      .map(([className, useSQLite]) => ({ className, useSQLite })),
  };
}

/**
 * `[assets]` as wrangler dev hands them to Miniflare: the asset router answers a request for a
 * file with it and passes the rest to the Worker (`has_user_worker`), or the Worker comes first,
 * for every request or for those its route rules match (`static_routing`). The router reads the
 * directory's listing once, when workerd starts: a file added later is served after a restart
 * (`celld dev --watch` restarts on it).
 */
function assetsOptions(assets: AssetsConfig): NonNullable<WorkerOptions["assets"]> {
  // Each Worker's files from its own directory (see miniflare-assets-wiring.ts).
  installAssetsWiring();
  const rules = assets.runWorkerFirst;
  return {
    directory: assets.directory,
    ...(assets.binding === undefined ? {} : { binding: assets.binding }),
    routerConfig:
      typeof rules === "boolean"
        ? { has_user_worker: true, invoke_user_worker_ahead_of_assets: rules }
        : { has_user_worker: true, static_routing: { user_worker: rules.worker, asset_worker: rules.assets } },
    assetConfig: {
      ...(assets.htmlHandling === undefined ? {} : { html_handling: assets.htmlHandling }),
      ...(assets.notFoundHandling === undefined ? {} : { not_found_handling: assets.notFoundHandling }),
    },
  };
}

/**
 * The bundle alone is a `script`. With the files it imports as Text, Data or CompiledWasm modules,
 * it is the first of an explicit `modules` list, as wrangler hands it to workerd.
 */
function workerCode(
  worker: WorkerConfig,
  bundle: WorkerBundle,
):
  | { modules: boolean; script: string; scriptPath: string; modulesRoot: string }
  | { modules: ModuleDefinition[]; modulesRoot: string } {
  // Stack traces and error messages name the user's file, not "<script>". Module names are
  // relative to modulesRoot, and workerd refuses one that climbs out with ".." (module-rules.ts
  // names every file so that it does not).
  const modulesRoot = dirname(worker.main);
  if (bundle.additionalModules.length === 0) {
    return { modules: bundle.modules, script: bundle.code, scriptPath: worker.main, modulesRoot };
  }
  return {
    modulesRoot,
    modules: [
      { type: "ESModule", path: worker.main, contents: bundle.code },
      ...bundle.additionalModules.map((m) => ({ type: m.type, path: join(modulesRoot, m.name), contents: m.contents })),
    ],
  };
}

/**
 * workerd refuses a compatibility date newer than itself. Fall back to the newest date this workerd
 * supports and say so, rather than refuse a project written for a newer one (wrangler 4.86, on the
 * same workerd, refuses to start; celld has no deploy step where that refusal would protect anyone).
 * What the newer date turned on by itself and the older one does not (Node.js compatibility, from
 * 2026-08-04) is kept, as flags: otherwise a project as create-cloudflare writes it would lose
 * the Node.js built-ins it bundled with.
 */
export function runnableCompatibility(
  worker: WorkerConfig,
  warn: (message: string) => void,
): { compatibilityDate: string; compatibilityFlags: string[] } {
  const date = worker.compatibilityDate <= supportedCompatibilityDate ? worker.compatibilityDate : supportedCompatibilityDate;
  const flags = runtimeCompatibilityFlags(worker.compatibilityDate, worker.compatibilityFlags, date);
  if (date !== worker.compatibilityDate) {
    const added = flags.filter((flag) => !worker.compatibilityFlags.includes(flag));
    warn(
      `${worker.configPath}: compatibility_date "${worker.compatibilityDate}" is newer than this workerd ` +
        `supports; running Worker "${worker.name}" with "${date}" instead` +
        (added.length === 0 ? "" : `, and with ${added.map((f) => `"${f}"`).join(", ")}, which "${worker.compatibilityDate}" turns on by itself`),
    );
  }
  return { compatibilityDate: date, compatibilityFlags: flags };
}
