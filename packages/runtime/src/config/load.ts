import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { d1MigrationHints } from "./d1-migrations.ts";
import { unsetCompatibilityDateWarning } from "./compatibility-date.ts";
import { absentWorkerWarnings, deploymentIssues, withoutProcessEnvOverBindings, type RawFile } from "./deployment-rules.ts";
import {
  booleanSetting,
  devVarsBeside,
  devVarsFileNames,
  dotEnvVariable,
  includeProcessEnvVariable,
  noDevVarsFiles,
  readDevVarsFromDisk,
  type DevVarsResult,
  type ProcessEnv,
  type ReadDevVarsFile,
} from "./dev-vars.ts";
import { unmigratedClassWarnings } from "./durable-object-classes.ts";
import { chooseEnvironment, definesEnvironments } from "./environments.ts";
import { ConfigError, formatPath, type ConfigIssue, type ConfigWarning } from "./issues.ts";
import { keyWarnings } from "./key-warnings.ts";
import { moduleRuleWarnings } from "./module-rule-warnings.ts";
import { queuesOf, toWorkerConfig, type Deployment, type WorkerConfig } from "./model.ts";
import { parseConfigText, type ParsedText } from "./read-file.ts";
import { onlyRequiredSecrets } from "./required-secrets.ts";
import { retryRetentionWarnings } from "./retry-retention.ts";
import { workerFileSchema, type WorkerFile } from "./schema.ts";

export interface ConfigSource {
  /** The file's name as the user gave it; relative names resolve against the working directory. */
  path: string;
  text: string;
}

export interface ParseOptions {
  /** Whether a Worker's `main` exists; defaults to the real filesystem. */
  fileExists?: (path: string) => boolean;
  /** Whether an `assets.directory` exists; defaults to the real filesystem. */
  directoryExists?: (path: string) => boolean;
  /**
   * Reads `.dev.vars` / `.env` / `.env.local` beside a config (paths as
   * `join(dirname(config path), name)`): the text, undefined when there is no such file; throw
   * when it cannot be read. Unset: no files, so texts in memory get no dev vars unless a test
   * hands them over here.
   */
  readDevVarsFile?: ReadDevVarsFile;
  /**
   * The environment celld runs in, for CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV and
   * CLOUDFLARE_INCLUDE_PROCESS_ENV (and, with the latter, the variables themselves). Unset: an
   * empty environment. loadDeployment passes process.env.
   */
  env?: ProcessEnv;
  /**
   * wrangler's `--env NAME`: each file's `[env.NAME]` over its top level (environments.ts), and
   * `.dev.vars.NAME` / `.env.NAME` beside it. Unset: the top level alone, as before.
   */
  environment?: string;
}

/**
 * Reads the config files of one deployment (as `wrangler dev -c a -c b`), and the `.dev.vars`
 * (or `.env` files) beside each, and validates them whole. Throws a ConfigError listing every problem
 * in every file, unreadable files included.
 */
export function loadDeployment(configPaths: string[], options: Pick<ParseOptions, "environment"> = {}): Deployment {
  const devVarsOptions = { ...devVarsSettings(process.env), environment: options.environment };
  return validate(
    configPaths.map((path) => ({
      path,
      parsed: readConfig(path),
      devVars: devVarsBeside(path, readDevVarsFromDisk, devVarsOptions),
    })),
    options,
  );
}

/** The same as loadDeployment, from texts already in memory. Reads nothing but `fileExists`. */
export function parseDeployment(files: ConfigSource[], options: ParseOptions = {}): Deployment {
  const devVarsOptions = { ...devVarsSettings(options.env ?? {}), environment: options.environment };
  return validate(
    files.map(({ path, text }) => ({
      path,
      parsed: parseConfigText(path, text),
      devVars: devVarsBeside(path, options.readDevVarsFile ?? noDevVarsFiles, devVarsOptions),
    })),
    options,
  );
}

/** wrangler's two settings for local secrets, from the environment; a bad value fails the deployment. */
function devVarsSettings(env: ProcessEnv): { dotEnv: boolean; processEnv?: ProcessEnv } {
  const dotEnv = booleanSetting(dotEnvVariable, env[dotEnvVariable], true);
  const include = booleanSetting(includeProcessEnvVariable, env[includeProcessEnvVariable], false);
  const issues = [dotEnv, include].flatMap((s) => (s.ok ? [] : [s.issue]));
  if (!dotEnv.ok || !include.ok) throw new ConfigError(issues);
  return include.value ? { dotEnv: dotEnv.value, processEnv: env } : { dotEnv: dotEnv.value };
}

function readConfig(path: string): ParsedText {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const err = error as NodeJS.ErrnoException;
    const message =
      err.code === "ENOENT" ? `config file not found (looked for ${resolve(path)})` : `cannot read the config file: ${err.message}`;
    return { ok: false, issues: [{ file: path, path: "", message }] };
  }
  return parseConfigText(path, text);
}

interface FileInput {
  path: string;
  parsed: ParsedText;
  devVars: DevVarsResult;
}

function validate(files: FileInput[], options: ParseOptions): Deployment {
  if (files.length === 0) {
    throw new ConfigError([{ file: "(none)", path: "", message: "a deployment needs at least one config file" }]);
  }
  const issues: ConfigIssue[] = [];
  const warnings: ConfigWarning[] = [];
  const raw: RawFile[] = [];
  const workers: { file: string; worker: WorkerConfig }[] = [];
  const brokenDevVars = new Set<string>();
  // Paths in a file's issues are written as the user wrote them: `env.production.queues...`.
  const located = new Map<string, (path: string) => string>();
  const noneDefined = !files.some(({ parsed }) => parsed.ok && definesEnvironments(parsed.value));

  for (const { path, parsed, devVars: found } of files) {
    const configPath = resolve(path);
    const chosen = parsed.ok ? chooseEnvironment(path, parsed.value, options.environment, noneDefined) : undefined;
    // A file whose environment cannot be chosen runs nothing, so nothing in it is checked further.
    const data = chosen !== undefined && chosen.issues.length === 0 ? chosen.data : undefined;
    located.set(path, chosen?.located ?? ((p) => p));
    if (chosen !== undefined) {
      issues.push(...chosen.issues);
      warnings.push(...chosen.warnings);
    }
    const required = onlyRequiredSecrets(path, data, found.ok ? found.devVars : undefined);
    const fromEnv = withoutProcessEnvOverBindings(path, data, required.devVars);
    const devVars = fromEnv.devVars;
    warnings.push(...required.warnings, ...fromEnv.warnings);
    raw.push({ file: path, dir: dirname(configPath), data, devVars, located: chosen?.located });
    if (!parsed.ok) issues.push(...parsed.issues);
    else if (data !== undefined) {
      warnings.push(...keyWarnings(path, data));
      const checked = workerFileSchema.safeParse(data);
      if (checked.success) {
        const worker = toWorkerConfig(configPath, checked.data, devVars);
        workers.push({ file: path, worker });
        warnings.push(...d1MigrationHints(path, worker, options.directoryExists ?? isDirectory));
        if (checked.data.compatibility_date === undefined) {
          warnings.push(unsetCompatibilityDateWarning(path, (data as Record<string, unknown>)["compatibility_date"]));
        }
        warnings.push(...deliveryDelayWarnings(path, checked.data));
        warnings.push(...repeatedCronWarnings(path, checked.data));
        warnings.push(...retryRetentionWarnings(path, checked.data));
        const { bindings = [] } = checked.data.durable_objects ?? {};
        warnings.push(...unmigratedClassWarnings(path, checked.data.name, bindings, checked.data.migrations));
        warnings.push(...moduleRuleWarnings(path, checked.data.rules));
      }
      else issues.push(...checked.error.issues.map((i) => ({ file: path, path: formatPath(i.path), message: i.message })));
    }
    // Two configs in one directory share its `.dev.vars`: say what is wrong with it once.
    if (!found.ok && !found.issues.every((i) => brokenDevVars.has(i.file))) {
      issues.push(...found.issues);
      for (const issue of found.issues) brokenDevVars.add(issue.file);
    }
  }
  issues.push(...deploymentIssues(raw, options.fileExists ?? isFile, options.directoryExists ?? isDirectory));
  warnings.push(...absentWorkerWarnings(raw));
  const asWritten = (i: ConfigIssue): ConfigIssue => {
    const locate = located.get(i.file);
    return locate === undefined || i.path === "" ? i : { ...i, path: locate(i.path) };
  };

  if (issues.length > 0) {
    throw new ConfigError(byFileOrder(issues.map(asWritten), raw, options.environment), warnings.map(asWritten));
  }
  const served = workers.map(({ worker }) => worker);
  return { workers: served, queues: queuesOf(served), warnings: warnings.map(asWritten) };
}

/**
 * Groups issues by config file in the order the files were given, a `.dev.vars` with its config,
 * keeping each file's own order.
 */
function byFileOrder(issues: ConfigIssue[], files: RawFile[], environment: string | undefined): ConfigIssue[] {
  const rank = new Map<string, number>();
  files.forEach((f, i) => {
    rank.set(f.file, i);
    for (const name of devVarsFileNames(environment)) {
      const beside = join(dirname(f.file), name);
      if (!rank.has(beside)) rank.set(beside, i);
    }
  });
  return [...issues].sort((a, b) => (rank.get(a.file) ?? 0) - (rank.get(b.file) ?? 0));
}

/** Whether `path` is a regular file (not a directory of that name). */
export function isFile(path: string): boolean {
  return existsSync(path) && statSync(path).isFile();
}

function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** A cron listed twice runs once at each of its times (the model keeps one): said, not refused. */
function repeatedCronWarnings(file: string, config: WorkerFile): ConfigWarning[] {
  const crons = config.triggers?.crons ?? [];
  return crons.flatMap((cron, i) => {
    const first = crons.indexOf(cron);
    return first === i
      ? []
      : [{ file, path: `triggers.crons[${i}]`, message: `repeats triggers.crons[${first}] (${JSON.stringify(cron)}); it runs once at each of its times` }];
  });
}

/**
 * celld honours `delivery_delay` (the delay of a send that names none), as Miniflare does, but
 * Cloudflare has deprecated it and no longer delays those sends: code that relies on it behaves
 * differently once deployed, so a delay that takes effect here is pointed out.
 */
function deliveryDelayWarnings(file: string, config: WorkerFile): ConfigWarning[] {
  return (config.queues?.producers ?? []).flatMap((producer, i) =>
    producer.delivery_delay > 0
      ? [
          {
            file,
            path: `queues.producers[${i}].delivery_delay`,
            message:
              `delays sends that name no delay by ${producer.delivery_delay} s here; Cloudflare has deprecated it ` +
              "and ignores it, so there they are not delayed (pass delaySeconds to send() to delay on both)",
          },
        ]
      : [],
  );
}
