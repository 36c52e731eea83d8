import { devVarsKind, type DevVars } from "./dev-vars.ts";
import type { ConfigWarning } from "./issues.ts";
import { isPlainObject } from "./raw.ts";

/**
 * wrangler's `secrets.required` (wrangler 4, March 2026): once a config has a `secrets` table, only
 * the names it lists are taken from `.dev.vars` or `.env`; the files' other entries are left out,
 * and a listed name no file sets is a warning, not an error (a deploy would refuse it; local
 * development goes on without it). Without a `secrets` table every entry is taken, as before.
 */
export interface RequiredSecretsResult {
  devVars: DevVars | undefined;
  warnings: ConfigWarning[];
}

/**
 * `devVars` cut down to what `data` (one config file, before validation) lists in
 * `secrets.required`. A `secrets` value the schema will refuse changes nothing here: the
 * deployment fails on it anyway.
 */
export function onlyRequiredSecrets(file: string, data: unknown, devVars: DevVars | undefined): RequiredSecretsResult {
  const required = requiredNames(data);
  if (required === undefined) return { devVars, warnings: [] };
  const listed = new Set(required);
  const kept = devVars === undefined ? undefined : keepOnly(devVars, listed);
  const missing = [...listed].filter((name) => !(kept?.values.has(name) ?? false));
  if (missing.length === 0) return { devVars: kept, warnings: [] };
  const sources = [...new Set(devVars?.paths.map(devVarsKind) ?? [])];
  if (devVars?.fromProcessEnv !== undefined) sources.push("the environment");
  const where =
    sources.length === 0
      ? "there is no .dev.vars or .env file beside the config"
      : `${missing.length === 1 ? "it is" : "they are"} not set in ${sources.join(" or ")}`;
  const message = `${missing.join(", ")}: ${where}, so the Worker's env will not have ${missing.length === 1 ? "it" : "them"}`;
  return { devVars: kept, warnings: [{ file, path: "secrets.required", message }] };
}

/** The listed names, when `secrets` is a table whose `required` (absent: none) is all strings. */
function requiredNames(data: unknown): string[] | undefined {
  const secrets = isPlainObject(data) ? data["secrets"] : undefined;
  if (!isPlainObject(secrets)) return undefined;
  const required = secrets["required"] ?? [];
  if (!Array.isArray(required) || !required.every((name) => typeof name === "string" && name !== "")) return undefined;
  return required as string[];
}

function keepOnly(devVars: DevVars, listed: ReadonlySet<string>): DevVars {
  const values = new Map([...devVars.values].filter(([name]) => listed.has(name)));
  const lines = new Map([...devVars.lines].filter(([name]) => listed.has(name)));
  // What the files set, not the environment's other variables: those were never asked for.
  const leftOut = [...devVars.lines.keys()].filter((name) => !listed.has(name));
  const fromProcessEnv = devVars.fromProcessEnv?.filter((name) => listed.has(name));
  return { paths: devVars.paths, values, lines, leftOut, ...(fromProcessEnv === undefined ? {} : { fromProcessEnv }) };
}
