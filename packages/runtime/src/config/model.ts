import { dirname, resolve } from "node:path";
import type { ModuleRule } from "./module-rules.ts";
import { assetsRouteRules } from "./assets-route-rules.ts";
import { defaultCompatibilityDate } from "./compatibility-date.ts";
import type { DevVars } from "./dev-vars.ts";
import { replayMigrations, type ClassStorage } from "./durable-object-classes.ts";
import type { ConfigWarning } from "./issues.ts";
import type { WorkerFile } from "./schema.ts";

/**
 * The typed deployment the rest of the host works from: camelCase, defaults filled, paths
 * absolute. Everything in it has been validated; code that reads it does not check it again.
 */

export interface ProducerConfig {
  binding: string;
  queue: string;
  deliveryDelaySeconds: number;
}

export interface ConsumerConfig {
  queue: string;
  /** `http_pull`: no Worker runs for it; it is pulled through the API port (Cloudflare's REST shape). */
  type: "worker" | "http_pull";
  /** A pull consumer's default lease length, ms. */
  visibilityTimeoutMs: number | undefined;
  maxBatchSize: number;
  maxBatchTimeoutSeconds: number;
  maxRetries: number;
  retryDelaySeconds: number;
  deadLetterQueue: string | undefined;
  maxConcurrency: number;
}

export interface WorkerConfig {
  configPath: string;
  name: string;
  main: string;
  compatibilityDate: string;
  compatibilityFlags: string[];
  /** `vars` from the config, with the entries of its `.dev.vars` (or `.env` files) over them. */
  vars: Record<string, string | number | boolean | object>;
  /**
   * Where the dev vars in `vars` came from, when a file was found (or the environment was read): the
   * absolute paths read, the names taken, the names `secrets.required` left out, and the names
   * whose value is the environment's. Names only: the values are secrets, and this is what may
   * be logged.
   */
  devVars: { paths: string[]; names: string[]; leftOut: string[]; fromEnvironment: string[] } | undefined;
  producers: ProducerConfig[];
  consumers: ConsumerConfig[];
  kvNamespaces: { binding: string; id: string }[];
  /**
   * `migrationsDir` is absolute (`migrations_dir`, default `migrations` beside the config), and
   * `migrationsTable` the table that records the applied ones, as wrangler names them. Both are
   * unset for a Worker that was uploaded rather than read from a config: it has no directory.
   */
  d1Databases: { binding: string; databaseName: string; databaseId: string; migrationsDir?: string; migrationsTable?: string }[];
  r2Buckets: { binding: string; bucketName: string }[];
  durableObjects: { name: string; className: string; scriptName?: string }[];
  /**
   * The Durable Object classes this Worker's `migrations` leave, bound or not, with their storage
   * backends: `sqlite` gives the class `ctx.storage.sql`.
   */
  durableObjectClasses: { className: string; storage: ClassStorage }[];
  services: { binding: string; service: string; entrypoint?: string }[];
  /**
   * `route` or `routes`, patterns checked: with the Worker's name host, where it answers on
   * `--port` (front/worker-router.ts).
   */
  routes: { pattern: string; customDomain: boolean }[];
  /**
   * `workers_dev` as written: false hides the Worker's `<name>.localhost` host (and
   * `<name>.<--workers-dev-domain>`); it still answers by its routes and its bindings. Unset: it
   * has them. `celld serve` keeps it from wrangler's `POST .../subdomain` (`workers_dev`).
   */
  workersDev?: boolean;
  /** `triggers.crons`, each once, as written: the Worker's scheduled() handler runs at each. */
  crons: string[];
  /** esbuild's `define`: each name in the code is replaced by the expression. */
  define: Record<string, string>;
  /** Import specifiers replaced by another module, resolved from the config file's directory. */
  alias: Record<string, string>;
  /**
   * Static files served in front of the Worker (directory absolute), and `binding` on its env.
   * Unset when the config has none.
   */
  assets: AssetsConfig | undefined;
  /** The config's module rules, in order; wrangler's defaults come after them. */
  moduleRules: ModuleRule[];
}

export interface AssetsConfig {
  directory: string;
  binding: string | undefined;
  htmlHandling: "auto-trailing-slash" | "force-trailing-slash" | "drop-trailing-slash" | "none" | undefined;
  notFoundHandling: "single-page-application" | "404-page" | "none" | undefined;
  /**
   * true: every request reaches the Worker first, which may call `env.<binding>.fetch()`. Route
   * rules: a request whose path a rule matches reaches the Worker first (`/api/*`), unless a
   * negative rule (`!/api/docs/*`) matches it too; the rest go to the files first.
   */
  runWorkerFirst: boolean | AssetsRouteRules;
}

/** `run_worker_first` route rules split as Miniflare's router takes them (`static_routing`). */
export interface AssetsRouteRules {
  /** The positive rules: these paths reach the Worker first. */
  worker: string[];
  /** The negative rules without their `!`: these paths go to the files first whatever else matches. */
  assets: string[];
}

export interface Deployment {
  /** In the order the config files were given; the first one's Worker serves HTTP. */
  workers: WorkerConfig[];
  /** Every queue named by a producer, consumer or dead_letter_queue, sorted. */
  queues: string[];
  warnings: ConfigWarning[];
}

/** Maps one validated file onto the model. `configPath` must already be absolute. */
export function toWorkerConfig(configPath: string, file: WorkerFile, devVars: DevVars | undefined): WorkerConfig {
  const queues = file.queues ?? { producers: [], consumers: [] };
  return {
    configPath,
    name: file.name,
    main: resolve(dirname(configPath), file.main),
    compatibilityDate: file.compatibility_date ?? defaultCompatibilityDate,
    compatibilityFlags: file.compatibility_flags,
    // fromEntries, not assignment: a dev var may be called `__proto__`.
    vars: devVars === undefined ? file.vars : { ...file.vars, ...Object.fromEntries(devVars.values) },
    devVars: devVarsSeen(devVars),
    producers: queues.producers.map((p) => ({
      binding: p.binding,
      queue: p.queue,
      deliveryDelaySeconds: p.delivery_delay,
    })),
    consumers: queues.consumers.map((c) => ({
      queue: c.queue,
      type: c.type ?? "worker",
      visibilityTimeoutMs: c.visibility_timeout_ms,
      maxBatchSize: c.max_batch_size,
      maxBatchTimeoutSeconds: c.max_batch_timeout,
      maxRetries: c.max_retries,
      retryDelaySeconds: c.retry_delay,
      deadLetterQueue: c.dead_letter_queue,
      maxConcurrency: c.max_concurrency,
    })),
    kvNamespaces: file.kv_namespaces.map((kv) => ({ binding: kv.binding, id: kv.id })),
    d1Databases: file.d1_databases.map((d1) => ({
      binding: d1.binding,
      databaseName: d1.database_name,
      databaseId: d1.database_id,
      migrationsDir: resolve(dirname(configPath), d1.migrations_dir),
      migrationsTable: d1.migrations_table,
    })),
    r2Buckets: file.r2_buckets.map((r2) => ({ binding: r2.binding, bucketName: r2.bucket_name })),
    durableObjects: (file.durable_objects?.bindings ?? []).map((d) => ({
      name: d.name,
      className: d.class_name,
      ...(d.script_name === undefined ? {} : { scriptName: d.script_name }),
    })),
    durableObjectClasses: [...replayMigrations(file.migrations).classes].map(([className, storage]) => ({ className, storage })),
    services: file.services.map((s) => ({
      binding: s.binding,
      service: s.service,
      ...(s.entrypoint === undefined ? {} : { entrypoint: s.entrypoint }),
    })),
    routes: file.routes ?? (file.route === undefined ? [] : [file.route]),
    ...(file.workers_dev === undefined ? {} : { workersDev: file.workers_dev }),
    crons: [...new Set(file.triggers?.crons ?? [])],
    define: file.define,
    alias: file.alias,
    assets: file.assets === undefined ? undefined : assetsOf(configPath, file.assets),
    moduleRules: file.rules,
  };
}

/** What the model keeps of the .dev.vars read: where from and which names, never the values. */
function devVarsSeen(devVars: DevVars | undefined): WorkerConfig["devVars"] {
  if (devVars === undefined) return undefined;
  return {
    paths: devVars.paths,
    names: [...devVars.values.keys()],
    leftOut: devVars.leftOut ?? [],
    fromEnvironment: devVars.fromProcessEnv ?? [],
  };
}

function assetsOf(configPath: string, assets: NonNullable<WorkerFile["assets"]>): NonNullable<WorkerConfig["assets"]> {
  return {
    directory: resolve(dirname(configPath), assets.directory),
    binding: assets.binding,
    htmlHandling: assets.html_handling,
    notFoundHandling: assets.not_found_handling,
    runWorkerFirst: assetsRouteRules(assets.run_worker_first),
  };
}

/** Every queue the Workers name, once each, sorted: the cells the host must open. */
export function queuesOf(workers: WorkerConfig[]): string[] {
  const names = new Set<string>();
  for (const worker of workers) {
    for (const p of worker.producers) names.add(p.queue);
    for (const c of worker.consumers) {
      names.add(c.queue);
      if (c.deadLetterQueue !== undefined) names.add(c.deadLetterQueue);
    }
  }
  return [...names].sort();
}
