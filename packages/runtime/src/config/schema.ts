import { limits } from "@celld/queue-cell";
import { z } from "zod";
import { isUnsetCompatibilityDate } from "./compatibility-date.ts";
import { replayMigrations } from "./durable-object-classes.ts";
import { defineProblem } from "./esbuild-define.ts";
import { CronExpressionError, parseCron } from "./cron/cron-expression.ts";
import { RoutePatternError, customDomainHost, parseRoutePattern } from "./route-pattern.ts";
import { showValue } from "./issues.ts";
import { runWorkerFirstSchema } from "./assets-route-rules.ts";

/**
 * The one schema of a wrangler config file as celld reads it: wrangler's snake_case keys, every
 * bound taken from `limits`, defaults filled. Each leaf carries its own message so a zod issue
 * converts into a user-facing line as it is (field, value, bound), with no second wording table.
 * Keys the schema does not name are stripped here and warned about by `key-warnings.ts`.
 */

const { queueNameCharsMax } = limits;
const queueNamePattern = new RegExp(`^[a-z0-9-]{1,${queueNameCharsMax}}$`);

type Expected = "a string" | "a number" | "a boolean" | "an array" | "an object (TOML table)";

function typeError(expected: Expected, bound = "") {
  return (issue: { input?: unknown }) =>
    issue.input === undefined ? "is required" : `must be ${expected}${bound}, got ${showValue(issue.input)}`;
}

function text() {
  return z.string({ error: typeError("a string") }).min(1, { error: "must not be empty" });
}

function queueName() {
  return z.string({ error: typeError("a string") }).refine((name) => queueNamePattern.test(name), {
    error: (issue) =>
      `must be a queue name of 1 to ${queueNameCharsMax} lowercase letters, digits or dashes, ` +
      `got ${showValue(issue.input)}`,
  });
}

/** Whole numbers only: Cloudflare takes integer seconds and counts for every queue setting. */
function intInRange(min: number, max: number, unit = "") {
  const bound = `${min} to ${max}${unit === "" ? "" : ` ${unit}`}`;
  return z.number({ error: typeError("a number", ` from ${bound}`) }).superRefine((value, ctx) => {
    if (Number.isInteger(value) && value >= min && value <= max) return;
    const what = Number.isInteger(value) ? "" : "a whole number ";
    ctx.addIssue({ code: "custom", input: value, message: `must be ${what}from ${bound}, got ${showValue(value)}` });
  });
}

function table<T extends z.core.$ZodLooseShape>(shape: T) {
  return z.object(shape, { error: typeError("an object (TOML table)") });
}

function list<T extends z.ZodType>(entry: T) {
  return z.array(entry, { error: typeError("an array") });
}

const compatibilityDate = z.string({ error: typeError("a string", ' "YYYY-MM-DD"') }).refine(isCalendarDate, {
  error: (issue) => `must be a date written "YYYY-MM-DD", got ${showValue(issue.input)}`,
});

function isCalendarDate(value: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  // Date.parse rolls 2024-02-30 over into March; a real date survives the round trip.
  const parsed = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 10) === value;
}

const jsonObject = z.union([z.record(z.string(), z.unknown()), z.array(z.unknown())]);
const varValue = z.union([z.string(), z.number(), z.boolean(), jsonObject], {
  error: (issue) => `must be a string, number, boolean or JSON object, got ${showValue(issue.input)}`,
});

const producer = table({
  binding: text(),
  queue: queueName(),
  delivery_delay: intInRange(0, limits.delaySecondsMax, "seconds").default(0),
});

const consumer = table({
  queue: queueName(),
  // "http_pull": nothing runs for it; clients pull over the API port (Cloudflare's REST shape).
  type: z
    .enum(["worker", "http_pull"], {
      error: (issue) => `must be "worker" or "http_pull", got ${showValue(issue.input)}`,
    })
    .optional(),
  max_batch_size: intInRange(limits.maxBatchSizeMin, limits.maxBatchSizeMax).default(limits.maxBatchSizeDefault),
  max_batch_timeout: intInRange(0, limits.batchTimeoutSecondsMax, "seconds").default(
    limits.batchTimeoutSecondsDefault,
  ),
  max_retries: intInRange(0, limits.maxRetriesMax).default(limits.maxRetriesDefault),
  retry_delay: intInRange(0, limits.delaySecondsMax, "seconds").default(0),
  dead_letter_queue: queueName().optional(),
  // Unset on Cloudflare means "autoscale up to the maximum".
  max_concurrency: intInRange(limits.maxConcurrencyMin, limits.maxConcurrencyMax).default(limits.maxConcurrencyMax),
  // A pull consumer's lease length when a pull names none (Cloudflare: at most 12 h).
  visibility_timeout_ms: intInRange(
    limits.visibilityTimeoutSecondsMin * 1000,
    limits.visibilityTimeoutSecondsMax * 1000,
  ).optional(),
});

// Parsed here, so that an expression Cloudflare would refuse is an error at its own path.
const cronExpression = z.string({ error: typeError("a string", ' such as "*/5 * * * *"') }).superRefine((value, ctx) => {
  try {
    parseCron(value);
  } catch (error) {
    if (!(error instanceof CronExpressionError)) throw error;
    ctx.addIssue({ code: "custom", input: value, message: error.message });
  }
});

// A Worker's `route` / `routes` entry: a pattern, or a table with one. Checked here, so that a
// pattern Cloudflare would refuse is an error at its own path; which Worker answers a request is
// front/worker-router.ts's. zone_id and zone_name name the zone on Cloudflare and change nothing
// here (the pattern names the host).
const routeEntry = z.unknown().transform((value, ctx): { pattern: string; customDomain: boolean } => {
  const fail = (message: string, path: string[] = []) => {
    ctx.addIssue({ code: "custom", input: value, path, message });
    return z.NEVER;
  };
  const entry = typeof value === "string" ? { pattern: value } : value;
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    return fail(`must be a route pattern such as "example.com/*", or a table with pattern and zone_name, got ${showValue(value)}`);
  }
  const { pattern, custom_domain: customDomain, zone_id: zoneId, zone_name: zoneName } = entry as Record<string, unknown>;
  const at = typeof value === "string" ? [] : ["pattern"];
  if (typeof pattern !== "string" || pattern === "") return fail(pattern === undefined ? "is required" : `must be a string, got ${showValue(pattern)}`, at);
  if (customDomain !== undefined && typeof customDomain !== "boolean") return fail(`must be true or false, got ${showValue(customDomain)}`, ["custom_domain"]);
  for (const [key, v] of [["zone_id", zoneId], ["zone_name", zoneName]] as const) {
    if (v !== undefined && typeof v !== "string") return fail(`must be a string, got ${showValue(v)}`, [key]);
  }
  try {
    if (customDomain === true) customDomainHost(pattern);
    else parseRoutePattern(pattern);
  } catch (error) {
    if (!(error instanceof RoutePatternError)) throw error;
    return fail(error.message.replace(/^route pattern ".*?" /, `${showValue(pattern)} `), at);
  }
  return { pattern, customDomain: customDomain === true };
});

const migration = table({
  tag: text(),
  new_classes: list(text()).default([]),
  new_sqlite_classes: list(text()).default([]),
  renamed_classes: list(table({ from: text(), to: text() })).default([]),
  deleted_classes: list(text()).default([]),
  transferred_classes: list(table({ from: text(), from_script: text(), to: text() })).default([]),
});

// Replayed here, once every step has its shape, so that a step that cannot be applied is an
// error with its path like any other (durable-object-classes.ts).
const migrations = list(migration).superRefine((steps, ctx) => {
  for (const issue of replayMigrations(steps).issues) ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
});

// wrangler hands `define` to esbuild as it is; a pair esbuild refuses is refused here, by key.
const define = z.record(z.string(), z.string({ error: typeError("a string") }), { error: typeError("an object (TOML table)") }).superRefine((entries, ctx) => {
  for (const [name, value] of Object.entries(entries)) {
    const problem = defineProblem(name, value);
    if (problem !== undefined) ctx.addIssue({ code: "custom", path: [name], input: value, message: problem });
  }
});

const moduleRuleTypes = ["Text", "Data", "CompiledWasm", "ESModule", "CommonJS"] as const;
const moduleRule = table({
  type: z.enum(moduleRuleTypes, {
    error: (issue) =>
      issue.input === undefined
        ? "is required"
        : `must be one of ${moduleRuleTypes.map((t) => `"${t}"`).join(", ")} (celld runs no Python Workers), got ${showValue(issue.input)}`,
  }),
  globs: list(z.string({ error: typeError("a string") })),
  fallthrough: z.boolean({ error: typeError("a boolean") }).optional(),
});

// wrangler's [assets], as Miniflare serves them.
const assets = table({
  directory: text(),
  binding: text().optional(),
  html_handling: z
    .enum(["auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none"], {
      error: (issue) =>
        `must be "auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash" or "none", got ${showValue(issue.input)}`,
    })
    .optional(),
  not_found_handling: z
    .enum(["single-page-application", "404-page", "none"], {
      error: (issue) => `must be "single-page-application", "404-page" or "none", got ${showValue(issue.input)}`,
    })
    .optional(),
  run_worker_first: runWorkerFirstSchema.optional(),
});

export const workerFileSchema = table({
  $schema: z.string().optional(),
  name: text(),
  main: text(),
  // Unset (or create-cloudflare's placeholder): the newest supported date, with a warning
  // (compatibility-date.ts); the model holds the date the Worker runs on.
  compatibility_date: z.preprocess((value) => (isUnsetCompatibilityDate(value) ? undefined : value), compatibilityDate.optional()),
  compatibility_flags: list(z.string({ error: typeError("a string") })).default([]),
  vars: z
    .record(z.string(), varValue, { error: typeError("an object (TOML table)") })
    .default({}),
  // wrangler's list of the secrets a Worker needs: only these are taken from .dev.vars or .env.
  secrets: table({ required: list(text()).default([]) }).optional(),
  queues: table({
    producers: list(producer).default([]),
    consumers: list(consumer).default([]),
  }).optional(),
  kv_namespaces: list(table({ binding: text(), id: text() })).default([]),
  d1_databases: list(
    table({
      binding: text(),
      database_name: text(),
      database_id: text(),
      // Read by `celld d1 migrations` (d1/), as by `wrangler d1 migrations`; celld dev applies none.
      migrations_dir: text().default("migrations"),
      migrations_table: text().default("d1_migrations"),
    }),
  ).default([]),
  r2_buckets: list(table({ binding: text(), bucket_name: text() })).default([]),
  durable_objects: table({
    bindings: list(table({ name: text(), class_name: text(), script_name: text().optional() })).default([]),
  }).optional(),
  // The history of the Worker's Durable Object classes: it decides which are SQLite-backed.
  migrations: migrations.default([]),
  services: list(table({ binding: text(), service: text(), entrypoint: text().optional() })).default([]),
  // Cron Triggers: the Worker's scheduled() handler runs at each (triggers/cron-triggers-plugin.ts).
  triggers: table({ crons: list(cronExpression).default([]) }).optional(),
  // Where the Worker answers on --port beside its <name>.localhost host (docs/routing.md).
  route: routeEntry.optional(),
  routes: list(routeEntry).optional(),
  // false: no <name>.localhost (or --workers-dev-domain) host, as Cloudflare's workers.dev URL goes.
  workers_dev: z.boolean({ error: typeError("a boolean") }).optional(),
  // Bundling, as wrangler passes them to esbuild.
  define: define.default({}),
  alias: z.record(z.string(), text(), { error: typeError("an object (TOML table)") }).default({}),
  assets: assets.optional(),
  // Module rules, before wrangler's defaults (module-rules.ts).
  rules: list(moduleRule).default([]),
});

export type WorkerFile = z.output<typeof workerFileSchema>;
