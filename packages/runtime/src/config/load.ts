import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { deploymentIssues, type RawFile } from "./deployment-rules.ts";
import { ConfigError, formatPath, type ConfigIssue, type ConfigWarning } from "./issues.ts";
import { keyWarnings } from "./key-warnings.ts";
import { queuesOf, toWorkerConfig, type Deployment, type WorkerConfig } from "./model.ts";
import { parseConfigText, type ParsedText } from "./read-file.ts";
import { workerFileSchema } from "./schema.ts";

export interface ConfigSource {
  /** The file's name as the user gave it; relative names resolve against the working directory. */
  path: string;
  text: string;
}

export interface ParseOptions {
  /** Whether a Worker's `main` exists; defaults to the real filesystem. */
  fileExists?: (path: string) => boolean;
}

/**
 * Reads the config files of one deployment (as `wrangler dev -c a -c b`) and validates them
 * whole. Throws a ConfigError listing every problem in every file, unreadable files included.
 */
export function loadDeployment(configPaths: string[]): Deployment {
  return validate(
    configPaths.map((path) => ({ path, parsed: readConfig(path) })),
    {},
  );
}

/** The same as loadDeployment, from texts already in memory. Reads nothing but `fileExists`. */
export function parseDeployment(files: ConfigSource[], options: ParseOptions = {}): Deployment {
  return validate(
    files.map(({ path, text }) => ({ path, parsed: parseConfigText(path, text) })),
    options,
  );
}

function readConfig(path: string): ParsedText {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const err = error as NodeJS.ErrnoException;
    const message = err.code === "ENOENT" ? "config file not found" : `cannot read the config file: ${err.message}`;
    return { ok: false, issues: [{ file: path, path: "", message }] };
  }
  return parseConfigText(path, text);
}

function validate(files: { path: string; parsed: ParsedText }[], options: ParseOptions): Deployment {
  if (files.length === 0) {
    throw new ConfigError([{ file: "(none)", path: "", message: "a deployment needs at least one config file" }]);
  }
  const issues: ConfigIssue[] = [];
  const warnings: ConfigWarning[] = [];
  const raw: RawFile[] = [];
  const workers: WorkerConfig[] = [];

  for (const { path, parsed } of files) {
    const configPath = resolve(path);
    raw.push({ file: path, dir: dirname(configPath), data: parsed.ok ? parsed.value : undefined });
    if (!parsed.ok) {
      issues.push(...parsed.issues);
      continue;
    }
    warnings.push(...keyWarnings(path, parsed.value));
    const checked = workerFileSchema.safeParse(parsed.value);
    if (checked.success) workers.push(toWorkerConfig(configPath, checked.data));
    else issues.push(...checked.error.issues.map((i) => ({ file: path, path: formatPath(i.path), message: i.message })));
  }
  issues.push(...deploymentIssues(raw, options.fileExists ?? isFile));

  if (issues.length > 0) throw new ConfigError(byFileOrder(issues, files), warnings);
  return { workers, queues: queuesOf(workers), warnings };
}

/** Groups issues by file in the order the files were given, keeping each file's own order. */
function byFileOrder(issues: ConfigIssue[], files: { path: string }[]): ConfigIssue[] {
  const rank = new Map(files.map((f, i) => [f.path, i]));
  return [...issues].sort((a, b) => (rank.get(a.file) ?? 0) - (rank.get(b.file) ?? 0));
}

function isFile(path: string): boolean {
  return existsSync(path) && statSync(path).isFile();
}
