import { join } from "node:path";
import type { ConsumerConfig, WorkerConfig } from "../config/index.ts";
import { assetsRouteRules } from "../config/assets-route-rules.ts";
import type { ModuleRule } from "../config/module-rules.ts";
import type { ScriptSettings, VersionRecord } from "./deploy-store.ts";
import { moduleTypes } from "./upload-form.ts";
import { isKnownBinding, type KnownBinding } from "./upload-metadata.ts";

/**
 * A deployed version as the host's deployment model: the same WorkerConfig a config file gives
 * `celld dev`, so `celld serve` starts it through the same host (bundling, the handler shim,
 * plugins). Its `main` is the stored main module; the host's bundler takes wrangler's bundle as it
 * would a source file, and each other uploaded module becomes a workerd module of its own through
 * a module rule naming it exactly.
 */
export interface VersionWorkerInput {
  version: VersionRecord;
  /** DeployStore.modulesDir of the version. */
  modulesDir: string;
  /** DeployStore.assetsDir of the version: its files, when it has `assets`. */
  assetsDir: string;
  settings: ScriptSettings;
  /** The Worker's secrets: bound like `secret_text`, over any var of the same name. */
  secrets: Record<string, string>;
  /** The queue consumers this Worker is (kept by the queues' store, not in the upload). */
  consumers: ConsumerConfig[];
}

export function versionWorker(input: VersionWorkerInput): WorkerConfig {
  const { version, modulesDir } = input;
  const bindings = version.bindings.filter(isKnownBinding);
  const of = <T extends KnownBinding["type"]>(type: T) => bindings.filter((b): b is Extract<KnownBinding, { type: T }> => b.type === type);
  const vars: Record<string, string | number | boolean | object> = {};
  for (const b of bindings) {
    if (b.type === "plain_text" || b.type === "secret_text") vars[b.name] = b.text;
    else if (b.type === "json") vars[b.name] = b.json as object;
  }
  for (const [name, value] of Object.entries(input.secrets)) vars[name] = value;
  return {
    configPath: join(modulesDir, "..", "version.json"),
    name: version.script,
    main: join(modulesDir, version.mainModule),
    compatibilityDate: version.compatibilityDate,
    compatibilityFlags: version.compatibilityFlags,
    vars,
    devVars: undefined,
    producers: of("queue").map((b) => ({ binding: b.name, queue: b.queue_name, deliveryDelaySeconds: b.delivery_delay ?? 0 })),
    consumers: input.consumers,
    kvNamespaces: of("kv_namespace").map((b) => ({ binding: b.name, id: b.namespace_id })),
    d1Databases: of("d1").map((b) => ({ binding: b.name, databaseName: b.database_name ?? b.id, databaseId: b.id })),
    r2Buckets: of("r2_bucket").map((b) => ({ binding: b.name, bucketName: b.bucket_name })),
    durableObjects: of("durable_object_namespace").map((b) => ({
      name: b.name,
      className: b.class_name,
      ...(b.script_name === undefined ? {} : { scriptName: b.script_name }),
    })),
    durableObjectClasses: version.durableObjectClasses,
    services: of("service").map((b) => ({ binding: b.name, service: b.service, ...(b.entrypoint === undefined ? {} : { entrypoint: b.entrypoint }) })),
    // A deployed script's routes come from the routes and custom domains APIs, not its upload.
    routes: [
      ...input.settings.routes.map((pattern) => ({ pattern, customDomain: false })),
      ...input.settings.customDomains.map((pattern) => ({ pattern, customDomain: true })),
    ],
    workersDev: input.settings.workersDev,
    crons: [...new Set(input.settings.schedules)],
    define: {},
    alias: {},
    assets:
      version.assets === undefined
        ? undefined
        : {
            directory: input.assetsDir,
            binding: of("assets")[0]?.name,
            htmlHandling: version.assets.config.html_handling,
            notFoundHandling: version.assets.config.not_found_handling,
            runWorkerFirst: assetsRouteRules(version.assets.config.run_worker_first),
          },
    moduleRules: version.modules.filter((m) => m.name !== version.mainModule).flatMap((m) => moduleRule(m.name, m.contentType)),
  };
}

/** A rule matching exactly the specifier wrangler's bundle imports the module by (`./<name>`). */
function moduleRule(name: string, contentType: string): ModuleRule[] {
  const type = moduleTypes[contentType];
  // JavaScript modules are bundled into main by the host's bundler; they need no rule.
  if (type === undefined || type === "ESModule" || type === "CommonJS") return [];
  return [{ type, globs: [`./${name}`, name], fallthrough: true }];
}
