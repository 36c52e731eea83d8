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
const binding = "is a binding type celld does not provide; the Worker's env will not have it";
const remote = "is ignored: celld runs every binding locally, on its data directory";
/**
 * Settings that only `wrangler deploy` (or Cloudflare's dashboard) acts on. A typical generated
 * config has several, so `formatWarnings` prints them as one line per file; warnings that change
 * what the Worker sees keep a line each.
 */
const deployOnly = "is a deploy setting with no effect on a local host; ignored";
const deployOnlyGrouped = "are deploy settings with no effect on a local host; ignored";

/**
 * wrangler's bundling keys that celld does not act on: it bundles `main` with esbuild as wrangler
 * does by default, plus `define`, `alias` and `rules`. Each says what differs and what to do.
 */
const bundlingKeys: Record<string, string> = {
  build:
    "is not run: celld does not run [build] command, so run it yourself before celld dev; otherwise celld bundles " +
    "`main` as the last build left it (stale, or missing)",
  tsconfig:
    "is not passed to esbuild: celld's esbuild reads, for each source file, the tsconfig.json nearest above it " +
    "(paths, baseUrl, jsx settings); settings only in this file do not apply",
  node_compat:
    "is ignored: celld does not add wrangler's legacy Node.js polyfills; add \"nodejs_compat\" to " +
    "compatibility_flags to have workerd provide the Node.js built-ins",
  minify: "is ignored: celld does not minify the bundle (wrangler's default); the code runs the same, only larger",
  keep_names: "is ignored: celld always keeps function and class names (wrangler's default)",
  no_bundle:
    "is ignored: celld always bundles `main` and its imports into one module; files wrangler would upload as " +
    "they are are bundled",
  find_additional_modules:
    "is ignored: celld includes only the modules that `main` imports; a module reached only through a computed " +
    "import() is not found",
  base_dir: "is ignored: module names are relative to the directory of `main`",
  preserve_file_names: "is ignored: a module file outside the directory of `main` is named by a hash of its contents and its name",
  jsx_factory: "is ignored: JSX compiles with the tsconfig.json nearest the file, else esbuild's default (React.createElement)",
  jsx_fragment: "is ignored: JSX compiles with the tsconfig.json nearest the file, else esbuild's default (React.Fragment)",
};

/** Wrangler keys celld knows and deliberately ignores, by where they sit (entries as `[]`). */
const ignoredKeys: Record<string, Record<string, string>> = {
  "": {
    env: "named environments are read only with --env NAME (or CLOUDFLARE_ENV); running the top-level configuration",
    dev: "is ignored: celld dev takes its address from --port and --host",
    exports:
      "is not read: celld takes Durable Object classes and their storage from `migrations`, as the wrangler of its " +
      "Miniflare does (`exports` came later, in wrangler 4.107); a class declared only here is KV-backed under celld, " +
      "so ctx.storage.sql throws",
    site:
      "is not supported (Workers Sites): the bucket is not served, env.__STATIC_CONTENT is undefined and an import of " +
      "__STATIC_CONTENT_MANIFEST fails to bundle; move the files to [assets], which celld serves",
    tail_consumers: "is ignored: celld runs no Tail Workers, so the Workers named here get no tail() events from this one",
    ...fill(tooling, ["limits", "containers"]),
    ...fill(deployOnly, [
      "account_id", "zone_id", "preview_urls", "observability",
      "usage_model", "placement", "logpush", "upload_source_maps", "keep_vars", "send_metrics",
      "legacy_env", "first_party_worker", "compliance_region",
    ]),
    ...bundlingKeys,
    ...fill(binding, [
      "ai", "vectorize", "hyperdrive", "analytics_engine_datasets", "browser", "send_email",
      "dispatch_namespaces", "mtls_certificates", "version_metadata", "images",
      "pipelines", "secrets_store_secrets", "wasm_modules", "text_blobs", "data_blobs", "workflows",
      "unsafe", "logfwdr", "unsafe_hello_world", "ratelimits", "assets_binding",
    ]),
  },
  "queues.producers[]": fill(remote, ["remote"]),
  "kv_namespaces[]": { ...fill(deployOnly, ["preview_id"]), ...fill(remote, ["remote"]) },
  "d1_databases[]": {
    ...fill(deployOnly, ["preview_database_id", "database_internal_env"]),
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
  const ignored = "is not a key celld knows, so it has no effect";
  return meant === undefined ? ignored : `${ignored} (did you mean "${meant}"?)`;
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
