import { readFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { expand } from "dotenv-expand";
import { parseDotenv } from "./dotenv.ts";
import { showValue, type ConfigIssue } from "./issues.ts";

/**
 * Local secrets beside a config file, found as `wrangler dev` (4.x) finds them: `.dev.vars` in the
 * config's directory alone; or, only when there is none, `.env` and then `.env.local`, merged,
 * the later file winning for a name both set. Each entry becomes a string on the Worker's `env`,
 * replacing a `vars` entry of the same name. With `--env NAME`, `.dev.vars.NAME` is read instead
 * of `.dev.vars` when it exists, and `.env.NAME` then `.env.NAME.local` join the `.env` files, as
 * wrangler dev reads them. As in wrangler, `${NAME}` references are expanded in the `.env` files
 * (see expandDotEnv) and never in `.dev.vars`.
 */
const devVarsFile = ".dev.vars";

/** The `.dev.vars` files to try, first found wins: the environment's, then the plain one. */
function devVarsCandidates(environment: string | undefined): string[] {
  return environment === undefined ? [devVarsFile] : [`${devVarsFile}.${environment}`, devVarsFile];
}

/** The `.env` files read when there is no `.dev.vars`, merged in this order (later wins). */
function dotEnvFiles(environment: string | undefined): string[] {
  return environment === undefined ? [".env", ".env.local"] : [".env", ".env.local", `.env.${environment}`, `.env.${environment}.local`];
}

/** Every file name dev vars may come from, for grouping their issues with their config. */
export function devVarsFileNames(environment: string | undefined): string[] {
  return [...devVarsCandidates(environment), ...dotEnvFiles(environment)];
}

/**
 * Reads one candidate file: its text, or undefined when it does not exist. Any other failure
 * throws (an errno error from the real filesystem): a file that is there but unreadable must not
 * quietly fall through to `.env` or to no secrets at all.
 */
export type ReadDevVarsFile = (path: string) => string | undefined;

export interface DevVars {
  /** Absolute paths of the files read, in order. */
  paths: string[];
  /** Name to value; a name set twice keeps its last value, as dotenv does. */
  values: Map<string, string>;
  /** The file (as the caller's config path names it) and line each name is last set on. */
  lines: Map<string, { file: string; line: number }>;
  /** Names the files set that `secrets.required` leaves out (required-secrets.ts). */
  leftOut?: string[];
  /** Names whose value came from celld's environment (CLOUDFLARE_INCLUDE_PROCESS_ENV=true). */
  fromProcessEnv?: string[];
}

/** The environment's variables, as `process.env` has them. */
export type ProcessEnv = Readonly<Record<string, string | undefined>>;

export type DevVarsResult = { ok: true; devVars: DevVars | undefined } | { ok: false; issues: ConfigIssue[] };

/**
 * The dev vars beside `configFile` (as the caller named it), or issues naming file and line.
 * `dotEnv: false` (CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV=false) reads `.dev.vars` alone.
 * `processEnv` (given when CLOUDFLARE_INCLUDE_PROCESS_ENV=true): where `.env` files would be read,
 * the environment's variables are taken too, and win over the files, as in wrangler.
 * `environment` (`--env NAME`) adds that environment's files (see above).
 */
export function devVarsBeside(
  configFile: string,
  read: ReadDevVarsFile,
  options: { dotEnv?: boolean; processEnv?: ProcessEnv; environment?: string | undefined } = {},
): DevVarsResult {
  const dir = dirname(configFile);
  const first = firstDevVarsFile(dir, read, options.environment);
  if (!first.ok) return first;
  const texts = first.text !== undefined ? [{ file: first.file, text: first.text }] : [];
  if (texts.length === 0 && options.dotEnv !== false) {
    for (const name of dotEnvFiles(options.environment)) {
      const file = join(dir, name);
      const found = readOne(file, read);
      if (!found.ok) return found;
      if (found.text !== undefined) texts.push({ file, text: found.text });
    }
  }
  const withProcessEnv = first.text === undefined && options.dotEnv !== false ? options.processEnv : undefined;
  if (texts.length === 0 && withProcessEnv === undefined) return { ok: true, devVars: undefined };
  const devVars: DevVars = { paths: [], values: new Map(), lines: new Map() };
  const issues: ConfigIssue[] = [];
  for (const { file, text } of texts) {
    const parsed = parseDotenv(text);
    if (!parsed.ok) {
      issues.push(...parsed.errors.map((e) => ({ file, path: "", message: `line ${e.line}: ${e.message}` })));
      continue;
    }
    devVars.paths.push(resolve(file));
    for (const entry of parsed.entries) {
      devVars.values.set(entry.name, entry.value);
      devVars.lines.set(entry.name, { file, line: entry.line });
    }
  }
  if (issues.length > 0) return { ok: false, issues };
  if (first.text === undefined) {
    const refused = expandDotEnv(devVars, withProcessEnv);
    if (refused.length > 0) return { ok: false, issues: refused };
  }
  return { ok: true, devVars };
}

/**
 * Expands `${NAME}`, `$NAME`, `${NAME:-default}` and the other forms in the merged `.env` values
 * with the library wrangler uses (dotenv-expand 12), on the same terms: a value sees the names set
 * before it in the merged files, and the environment's only with CLOUDFLARE_INCLUDE_PROCESS_ENV
 * (`processEnv`), whose variables then also become dev vars and win over a file's. `\$` is a
 * literal `$`. The library's own quirks, such as a reference to a later name expanding to
 * nothing, are wrangler's too, and kept.
 */
function expandDotEnv(devVars: DevVars, processEnv: ProcessEnv | undefined): ConfigIssue[] {
  const refused = [...devVars.values].flatMap(([name, value]) => {
    if (!refersToObjectMember(value)) return [];
    const at = devVars.lines.get(name)!;
    // The name referred to is part of the value, and values are never shown.
    const message =
      `line ${at.line}: the value of ${name} refers to a name every JavaScript object has (such as ` +
      `$constructor or \${toString}), which the expansion wrangler uses cannot look up (wrangler hangs or ` +
      `fails on it). Rename that variable, or write \\$ for a literal $`;
    return [{ file: at.file, path: "", message }];
  });
  if (refused.length > 0) return refused;
  // fromEntries defines each name as an own property, so `__proto__` stays an ordinary name; and
  // the library reads processEnv[name] first, which on a plain {} finds Object.prototype there.
  const parsed = Object.fromEntries(devVars.values);
  const env = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(processEnv ?? {})) if (value !== undefined) env[name] = value;
  // The library keeps an environment value over a file's only when it is not empty.
  const fromProcessEnv = Object.keys(env).filter((name) => env[name] !== "" || !devVars.values.has(name));
  expand({ parsed, processEnv: env });
  if (processEnv === undefined) {
    for (const name of devVars.values.keys()) devVars.values.set(name, parsed[name]!);
    return [];
  }
  // The library leaves the result in `env`: the environment's variables first, then the files'.
  // A name whose value is the environment's has no file line standing for it any more.
  devVars.values = new Map(Object.entries(env));
  for (const name of fromProcessEnv) devVars.lines.delete(name);
  devVars.fromProcessEnv = fromProcessEnv;
  return [];
}

/**
 * Whether `value` has a `$NAME` or `${NAME` naming a member of every object (`constructor`,
 * `toString`, `__proto__`...): dotenv-expand finds those on its lookup object even when no entry
 * sets them, and `${constructor}` then loops forever. `\$` is not a reference.
 */
function refersToObjectMember(value: string): boolean {
  for (const match of value.matchAll(/(?<!\\)\$\{?([A-Za-z_][A-Za-z0-9_]*)/g)) {
    if (match[1]! in Object.prototype) return true;
  }
  return false;
}

type ReadResult = { ok: true; text: string | undefined } | { ok: false; issues: ConfigIssue[] };

/** The first `.dev.vars` candidate that exists (`file` is the last one tried when none does). */
function firstDevVarsFile(
  dir: string,
  read: ReadDevVarsFile,
  environment: string | undefined,
): { ok: true; file: string; text: string | undefined } | { ok: false; issues: ConfigIssue[] } {
  let file = join(dir, devVarsFile);
  for (const name of devVarsCandidates(environment)) {
    file = join(dir, name);
    const found = readOne(file, read);
    if (!found.ok) return found;
    if (found.text !== undefined) return { ok: true, file, text: found.text };
  }
  return { ok: true, file, text: undefined };
}

function readOne(file: string, read: ReadDevVarsFile): ReadResult {
  try {
    return { ok: true, text: read(file) };
  } catch (error) {
    // The errno message names the path and the reason (EACCES, EISDIR); never any content.
    const reason = error instanceof Error ? error.message : String(error);
    return { ok: false, issues: [{ file, path: "", message: `cannot read the file: ${reason}` }] };
  }
}

/** The real filesystem: absent is undefined, anything else that goes wrong throws. */
export function readDevVarsFromDisk(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * One of wrangler's boolean settings from the environment: "true" or "false" in any case, or
 * unset for `fallback`. Another value is an issue, as wrangler refuses it rather than guess.
 */
export function booleanSetting(
  variable: string,
  value: string | undefined,
  fallback: boolean,
): { ok: true; value: boolean } | { ok: false; issue: ConfigIssue } {
  if (value === undefined) return { ok: true, value: fallback };
  if (value.toLowerCase() === "true") return { ok: true, value: true };
  if (value.toLowerCase() === "false") return { ok: true, value: false };
  return { ok: false, issue: { file: "(environment)", path: variable, message: `must be "true" or "false", got ${showValue(value)}` } };
}

/** Whether `.env` files are read when there is no `.dev.vars` (default true). */
export const dotEnvVariable = "CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV";
/** Whether the environment's variables join the `.env` files' (default false). */
export const includeProcessEnvVariable = "CLOUDFLARE_INCLUDE_PROCESS_ENV";

/** For parseDeployment without a reader: texts in memory have no files beside them. */
export const noDevVarsFiles: ReadDevVarsFile = () => undefined;

/** `.dev.vars`, `.env`, `.env.local` (or an environment's): a file named by its kind, for messages. */
export function devVarsKind(file: string): string {
  return basename(file);
}
