import { readFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { parseDotenv } from "./dotenv.ts";
import type { ConfigIssue } from "./issues.ts";

/**
 * Local secrets beside a config file, found as `wrangler dev` (4.x) finds them: `.dev.vars` in the
 * config's directory, or, only when there is none, `.env`. Each entry becomes a string on the
 * Worker's `env`, replacing a `vars` entry of the same name. celld has no `--env`, so the
 * `.dev.vars.<env>` and `.env.<env>` variants are never read.
 */
export const devVarsFileNames = [".dev.vars", ".env"] as const;

/**
 * Reads one candidate file: its text, or undefined when it does not exist. Any other failure
 * throws (an errno error from the real filesystem): a file that is there but unreadable must not
 * quietly fall through to `.env` or to no secrets at all.
 */
export type ReadDevVarsFile = (path: string) => string | undefined;

export interface DevVars {
  /** The file as the caller's config path names it (`app/.dev.vars`), for messages. */
  file: string;
  /** Absolute path of the file. */
  path: string;
  /** Name to value; a name given twice keeps its last value, as dotenv does. */
  values: Map<string, string>;
  /** The line each name is (last) set on, for messages about a name. */
  lines: Map<string, number>;
}

export type DevVarsResult = { ok: true; devVars: DevVars | undefined } | { ok: false; issues: ConfigIssue[] };

/** The dev vars beside `configFile` (as the caller named it), or issues naming file and line. */
export function devVarsBeside(configFile: string, read: ReadDevVarsFile): DevVarsResult {
  for (const name of devVarsFileNames) {
    const file = join(dirname(configFile), name);
    let text: string | undefined;
    try {
      text = read(file);
    } catch (error) {
      // The errno message names the path and the reason (EACCES, EISDIR); never any content.
      const reason = error instanceof Error ? error.message : String(error);
      return { ok: false, issues: [{ file, path: "", message: `cannot read the file: ${reason}` }] };
    }
    if (text === undefined) continue;
    const parsed = parseDotenv(text);
    if (!parsed.ok) {
      return { ok: false, issues: parsed.errors.map((e) => ({ file, path: "", message: `line ${e.line}: ${e.message}` })) };
    }
    const values = new Map<string, string>();
    const lines = new Map<string, number>();
    for (const entry of parsed.entries) {
      values.set(entry.name, entry.value);
      lines.set(entry.name, entry.line);
    }
    return { ok: true, devVars: { file, path: resolve(file), values, lines } };
  }
  return { ok: true, devVars: undefined };
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

/** For parseDeployment without a reader: texts in memory have no files beside them. */
export const noDevVarsFiles: ReadDevVarsFile = () => undefined;

/** `.dev.vars` or `.env`, for messages that speak of the file by its kind. */
export function devVarsKind(devVars: DevVars): string {
  return basename(devVars.file);
}
