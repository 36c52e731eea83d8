import { isConfigError, parseDeployment, type ConfigError, type ParseOptions } from "../src/config/index.ts";

/** The ConfigError `run` throws; fails the test if it throws anything else, or nothing. */
export function failure(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (isConfigError(error)) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

/** One Worker "w" from w.json, with `config` over a minimal valid config; every file it names exists. */
export function parseOne(config: Record<string, unknown>) {
  const text = JSON.stringify({ name: "w", main: "index.js", compatibility_date: "2026-04-01", ...config });
  const everyFileExists: ParseOptions = { fileExists: () => true };
  return parseDeployment([{ path: "w.json", text }], everyFileExists);
}

/** What parseOne refuses in `config`, as "path: message" lines. */
export const issuesOf = (config: Record<string, unknown>): string[] =>
  failure(() => parseOne(config)).issues.map((i) => `${i.path}: ${i.message}`);
