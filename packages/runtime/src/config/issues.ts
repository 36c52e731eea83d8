/**
 * How a config problem is named: the file, the key path as a wrangler user writes it
 * (`queues.consumers[0].max_batch_size`), and a message with the value and the bound. Every check
 * of the config package reports through these, so all problems read alike.
 */
export interface ConfigIssue {
  /** The config file as the caller named it (what the user typed after `-c`). */
  file: string;
  /** Key path inside that file; "" for the file as a whole. */
  path: string;
  message: string;
}

export type ConfigWarning = ConfigIssue;

export class ConfigError extends Error {
  readonly code = "ERR_CONFIG" as const;
  readonly issues: readonly ConfigIssue[];
  /** Found alongside the errors; a mistyped key often explains one of them. */
  readonly warnings: readonly ConfigWarning[];

  constructor(issues: readonly ConfigIssue[], warnings: readonly ConfigWarning[] = []) {
    super(issues.map(formatIssue).join("\n"));
    this.name = "ConfigError [ERR_CONFIG]";
    this.issues = issues;
    this.warnings = warnings;
  }
}

export function isConfigError(error: unknown): error is ConfigError {
  return error instanceof ConfigError;
}

export function formatIssue(issue: ConfigIssue): string {
  return issue.path === "" ? `${issue.file}: ${issue.message}` : `${issue.file}: ${issue.path}: ${issue.message}`;
}

/** `["queues", "consumers", 0, "queue"]` -> `queues.consumers[0].queue`; odd keys are quoted. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && /^[A-Za-z_$][\w$]*$/.test(key)) out += out === "" ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

/** A value as it appears in a message: strings quoted and cut short, objects by kind. */
export function showValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (value === null) return "null";
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return "an array";
  // TOML's unquoted dates arrive as Date objects; show what the user wrote.
  if (value instanceof Date) return `the unquoted date ${value.toISOString()}`;
  if (typeof value === "object") return "an object";
  return String(value);
}
