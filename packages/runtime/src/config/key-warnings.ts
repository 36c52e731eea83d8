import { z } from "zod";
import { closestKey } from "./closest-key.ts";
import { formatIssue, formatPath, type ConfigWarning } from "./issues.ts";
import { isPlainObject } from "./raw.ts";
import { workerFileSchema } from "./schema.ts";

/**
 * Warnings for keys celld does not act on. A config written for Cloudflare should still load, so
 * these are never errors; but a key that silently does nothing (a typo, an unsupported binding)
 * is how a deployment ends up behaving differently from what its author reads, so each one is
 * named with its file and path. The known-key list is the schema itself, so the two cannot drift.
 */

const tooling = "is a wrangler key celld ignores";
const bundling = "is a wrangler bundling key celld ignores: celld bundles `main` itself";
const binding = "is a binding type celld does not provide; the Worker's env will not have it";
const remote = "is ignored: celld runs every binding locally, on its data directory";
/**
 * Settings that only `wrangler deploy` (or Cloudflare's dashboard) acts on. A typical generated
 * config has several, so `formatWarnings` prints them as one line per file; warnings that change
 * what the Worker sees keep a line each.
 */
const deployOnly = "is a deploy setting with no effect on a local host; ignored";
const deployOnlyGrouped = "are deploy settings with no effect on a local host; ignored";

/** Wrangler keys celld knows and deliberately ignores, by where they sit (entries as `[]`). */
const ignoredKeys: Record<string, Record<string, string>> = {
  "": {
    env: "named environments are not supported; celld reads only the top-level keys",
    triggers: "is ignored: cron triggers do not fire under celld, so a scheduled() handler never runs",
    dev: "is ignored: celld dev takes its address from --port and --host",
    exports:
      "is not read: celld takes Durable Object classes and their storage from `migrations`, as the wrangler of its " +
      "Miniflare does (`exports` came later, in wrangler 4.107); a class declared only here is KV-backed under celld, " +
      "so ctx.storage.sql throws",
    ...fill(tooling, ["limits", "site", "containers"]),
    ...fill(deployOnly, [
      "account_id", "zone_id", "routes", "route", "workers_dev", "preview_urls", "observability",
      "usage_model", "placement", "logpush", "upload_source_maps", "keep_vars", "send_metrics",
      "legacy_env", "first_party_worker", "compliance_region",
    ]),
    ...fill(bundling, [
      "build", "minify", "keep_names", "node_compat", "no_bundle", "find_additional_modules",
      "base_dir", "preserve_file_names", "tsconfig", "jsx_factory", "jsx_fragment",
    ]),
    ...fill(binding, [
      "ai", "vectorize", "hyperdrive", "analytics_engine_datasets", "browser", "send_email",
      "dispatch_namespaces", "mtls_certificates", "tail_consumers", "version_metadata", "images",
      "pipelines", "secrets_store_secrets", "wasm_modules", "text_blobs", "data_blobs", "workflows",
      "unsafe", "logfwdr", "unsafe_hello_world", "ratelimits", "assets_binding",
    ]),
  },
  "queues.producers[]": fill(remote, ["remote"]),
  "kv_namespaces[]": { ...fill(deployOnly, ["preview_id"]), ...fill(remote, ["remote"]) },
  "d1_databases[]": {
    ...fill(deployOnly, ["preview_database_id", "migrations_dir", "migrations_table", "database_internal_env"]),
    ...fill(remote, ["remote"]),
  },
  "r2_buckets[]": { ...fill(deployOnly, ["preview_bucket_name", "jurisdiction"]), ...fill(remote, ["remote"]) },
  "durable_objects.bindings[]": fill(deployOnly, ["environment"]),
  "services[]": { ...fill(deployOnly, ["environment"]), ...fill(remote, ["remote"]) },
};

/**
 * The warnings as printed lines: each as `formatIssue` writes it, except that a file's deploy-only
 * keys share one line, where the first of them stood.
 */
export function formatWarnings(warnings: readonly ConfigWarning[]): string[] {
  const deployKeys = new Map<string, string[]>();
  for (const w of warnings) if (w.message === deployOnly) deployKeys.set(w.file, [...(deployKeys.get(w.file) ?? []), w.path]);
  const lines: string[] = [];
  for (const w of warnings) {
    const keys = w.message === deployOnly ? deployKeys.get(w.file) : undefined;
    if (keys === undefined) lines.push(formatIssue(w));
    else if (keys[0] === w.path) {
      lines.push(keys.length === 1 ? formatIssue(w) : formatIssue({ file: w.file, path: keys.join(", "), message: deployOnlyGrouped }));
    }
  }
  return lines;
}

/** A typo is the usual reason for an unknown key, so the key it was probably meant to be is named. */
function unknownKeyMessage(key: string, keysHere: readonly string[]): string {
  const meant = closestKey(key, keysHere);
  return meant === undefined ? "is not a key celld knows; ignored" : `is not a key celld knows; ignored (did you mean "${meant}"?)`;
}

function fill(message: string, keys: string[]): Record<string, string> {
  return Object.fromEntries(keys.map((key) => [key, message]));
}

/** Every key in `value` (one parsed config file) that the schema does not name. */
export function keyWarnings(file: string, value: unknown): ConfigWarning[] {
  const warnings: ConfigWarning[] = [];
  walk(workerFileSchema, value, [], (path, key, keysHere) => {
    const known = ignoredKeys[pattern(path)];
    const ignored = known !== undefined && Object.hasOwn(known, key) ? known[key] : undefined;
    warnings.push({ file, path: formatPath([...path, key]), message: ignored ?? unknownKeyMessage(key, keysHere) });
  });
  return warnings;
}

function walk(
  schema: z.ZodType,
  value: unknown,
  path: (string | number)[],
  onUnknown: (path: (string | number)[], key: string, keysHere: readonly string[]) => void,
): void {
  const inner = unwrap(schema);
  if (inner instanceof z.ZodArray && Array.isArray(value)) {
    value.forEach((entry, i) => walk(inner.element as z.ZodType, entry, [...path, i], onUnknown));
    return;
  }
  if (!(inner instanceof z.ZodObject) || !isPlainObject(value)) return;
  const shape = inner.shape as Record<string, z.ZodType>;
  for (const [key, child] of Object.entries(value)) {
    // hasOwn: a key such as "constructor" must not find Object.prototype's member.
    if (!Object.hasOwn(shape, key)) onUnknown(path, key, Object.keys(shape));
    else walk(shape[key] as z.ZodType, child, [...path, key], onUnknown);
  }
}

/** `["queues", "producers", 2]` -> `queues.producers[]`, the form `ignoredKeys` is keyed by. */
function pattern(path: (string | number)[]): string {
  return path.reduce<string>((out, k) => (typeof k === "number" ? `${out}[]` : out === "" ? k : `${out}.${k}`), "");
}

function unwrap(schema: z.ZodType): z.ZodType {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodDefault) return unwrap(schema.unwrap() as z.ZodType);
  return schema;
}
