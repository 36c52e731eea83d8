import { formatPath, type ConfigIssue, type ConfigWarning } from "./issues.ts";
import { isPlainObject, rawString, type RawTable } from "./raw.ts";

/**
 * wrangler's named environments (`[env.production]`, `--env production`), as wrangler 4 resolves
 * them (its normalizeAndValidateEnvironment): the chosen section's keys over the top level, except
 * that bindings and `vars` / `define` / `secrets` are never inherited, a few keys are read from
 * the top level only, and the Worker is named `<name>-<env>` unless the section names it.
 * The result is one flat table that the rest of the pipeline validates as if it were the file,
 * with `located` turning its key paths back into the ones the user wrote (`env.production.vars`).
 */

/**
 * Keys an environment does not inherit: wrangler warns when the top level has one and the
 * environment does not, and the environment then has none.
 */
const notInherited = new Set([
  "vars", "define", "secrets", "durable_objects", "kv_namespaces", "queues", "r2_buckets", "d1_databases",
  "services", "workflows", "cloudchamber", "containers", "send_email", "vectorize", "hyperdrive",
  "analytics_engine_datasets", "dispatch_namespaces", "mtls_certificates", "tail_consumers", "unsafe",
  "browser", "ai", "images", "pipelines", "secrets_store_secrets", "version_metadata", "ratelimits",
  "unsafe_hello_world", "assets_binding",
]);

/**
 * Keys wrangler reads from the top level whatever the environment: in an `[env.X]` section they
 * have no effect.
 */
export const topLevelOnly = new Set([
  "$schema", "env", "legacy_env", "send_metrics", "keep_vars", "dev", "site", "alias",
  "wasm_modules", "text_blobs", "data_blobs", "pages_build_output_dir",
]);

export interface EnvironmentChoice {
  /** The table the schema validates: the file itself without `--env`. */
  data: unknown;
  /** A key path of `data` as the user wrote it in the file. */
  located: (path: string) => string;
  issues: ConfigIssue[];
  warnings: ConfigWarning[];
}

const asWritten = (path: string): string => path;

/** Whether a parsed file has at least one named environment. */
export function definesEnvironments(data: unknown): boolean {
  return isPlainObject(data) && isPlainObject(data["env"]) && Object.keys(data["env"]).length > 0;
}

/**
 * The configuration of `file` under `--env environment` (none: the top level alone). A file that
 * defines environments but not this one is refused, listing those it defines. A file with no
 * `env` at all runs its top level, named as wrangler names it, with a warning, when another file
 * of the deployment defines environments (`noneDefined` false); when none does, `--env` is
 * refused: wrangler only warns, but with nothing to choose from the flag is a slip (a config
 * left out, a mistyped script), and a self-hosted production start should not run the wrong one.
 */
export function chooseEnvironment(
  file: string,
  data: unknown,
  environment: string | undefined,
  noneDefined: boolean,
): EnvironmentChoice {
  if (environment === undefined || !isPlainObject(data)) return { data, located: asWritten, issues: [], warnings: [] };
  const envs = data["env"];
  const prefix = formatPath(["env", environment]);
  if (envs !== undefined && !isPlainObject(envs)) {
    const message = `must be a table of named environments, so --env ${environment} cannot be read from it`;
    return { data, located: asWritten, issues: [{ file, path: "env", message }], warnings: [] };
  }
  const section = envs === undefined || !Object.hasOwn(envs, environment) ? undefined : envs[environment];
  if (section === undefined) {
    const defined = Object.keys(envs ?? {});
    if (defined.length > 0) {
      const message =
        `--env ${environment}: this file defines no environment of that name; it defines ` +
        `${defined.map((name) => `"${name}"`).join(", ")} (add [${prefix}] to run it)`;
      return { data, located: asWritten, issues: [{ file, path: "", message }], warnings: [] };
    }
    if (noneDefined) {
      const message =
        `--env ${environment}: this file defines no named environments ([${prefix}]), and neither does ` +
        "any other config of the deployment; drop --env (and CLOUDFLARE_ENV) to run the top level";
      return { data, located: asWritten, issues: [{ file, path: "", message }], warnings: [] };
    }
    const top = Object.fromEntries(Object.entries(data).filter(([key]) => key !== "env"));
    const named = withEnvironmentName(top, undefined, environment);
    const message =
      `--env ${environment}: this file defines no environments, so its top-level configuration runs` +
      (named === top ? "" : `, as the Worker "${String(named["name"])}" (wrangler names it so)`);
    return { data: named, located: asWritten, issues: [], warnings: [{ file, path: "", message }] };
  }
  if (!isPlainObject(section)) {
    return {
      data,
      located: asWritten,
      issues: [{ file, path: prefix, message: "must be an object (TOML table) of the environment's keys" }],
      warnings: [],
    };
  }
  return resolveSection(file, data, section, environment, prefix);
}

function resolveSection(file: string, top: RawTable, section: RawTable, environment: string, prefix: string): EnvironmentChoice {
  const warnings: ConfigWarning[] = [];
  const fromSection = new Set<string>();
  const out: RawTable = {};
  for (const [key, value] of Object.entries(top)) {
    if (key === "env" || notInherited.has(key)) continue;
    out[key] = value;
  }
  for (const [key, value] of Object.entries(section)) {
    if (topLevelOnly.has(key)) {
      warnings.push({
        file,
        path: `${prefix}.${key}`,
        message: "is read only from the top level (as wrangler does); ignored in an environment",
      });
      continue;
    }
    out[key] = value;
    fromSection.add(key);
  }
  for (const key of notInherited) {
    if (Object.hasOwn(top, key) && !Object.hasOwn(section, key)) {
      warnings.push({
        file,
        path: `${prefix}.${key}`,
        message:
          `is not set, and "${key}" is not inherited by environments: the top level's ${key} does not apply ` +
          `under --env ${environment}, so this Worker has none (add "${key}" to [${prefix}] if it should)`,
      });
    }
  }
  const named = withEnvironmentName(out, rawString(section, "name"), environment);
  const located = (path: string): string => {
    const key = /^[^.[]+/.exec(path)?.[0] ?? "";
    return fromSection.has(key) ? `${prefix}${path.startsWith("[") ? "" : "."}${path}` : path;
  };
  return { data: named, located, issues: [], warnings };
}

/**
 * wrangler's default (legacy) environments deploy `<name>-<env>` unless the section names its
 * Worker; with `legacy_env = false` (service environments) the name stays.
 */
function withEnvironmentName(table: RawTable, ownName: string | undefined, environment: string): RawTable {
  if (ownName !== undefined || table["legacy_env"] === false) return table;
  const name = rawString(table, "name");
  return name === undefined ? table : { ...table, name: `${name}-${environment}` };
}
