import { formatIssue, type ConfigIssue, type WorkerConfig } from "../config/index.ts";

/**
 * workerd refused to start the Workers: a module threw at its top level, a compatibility flag is
 * unknown, a service binding names an entrypoint its Worker does not export, and so on. workerd
 * has said what is wrong on its stderr, which the host log shows; Miniflare's own error
 * (ERR_RUNTIME_FAILURE) adds only Miniflare's internal stack, so it is replaced by this one. Where
 * workerd's words point at a key of a Worker's config, the error names the file and the key.
 */
export class RuntimeStartError extends Error {
  readonly code = "ERR_RUNTIME_START" as const;
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[]) {
    const why = issues.length === 0 ? " (workerd's messages above say why)" : `: ${issues.map(formatIssue).join("; ")}`;
    super(`the Workers could not start, so nothing was started${why}`);
    this.name = "RuntimeStartError [ERR_RUNTIME_START]";
    this.issues = issues;
  }
}

export function isRuntimeFailure(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "ERR_RUNTIME_FAILURE";
}

// As workerd 1.20260426 prints them; Miniflare names a Worker's service "core:user:<name>".
const unknownFlag = /^service core:user:(.+): No such compatibility flag: (\S+)$/;
const missingEntrypoint =
  /^Worker "core:user:(.+)"'s binding "(.+)" refers to service "core:user:(.+)" with a named entrypoint "(.+)", but "core:user:.+" has no such named entrypoint\.$/;

/** Reads workerd's output while it starts, for the lines that say which config key is at fault. */
export class StartBlame {
  readonly issues: ConfigIssue[] = [];
  readonly #workers: ReadonlyMap<string, WorkerConfig>;

  constructor(workers: readonly WorkerConfig[]) {
    this.#workers = new Map(workers.map((w) => [w.name, w]));
  }

  read(line: string): void {
    const flag = unknownFlag.exec(line);
    const flagWorker = flag === null ? undefined : this.#workers.get(flag[1]!);
    if (flag !== null && flagWorker !== undefined) {
      const index = flagWorker.compatibilityFlags.indexOf(flag[2]!);
      this.issues.push({
        file: flagWorker.configPath,
        path: index === -1 ? "compatibility_flags" : `compatibility_flags[${index}]`,
        message: `workerd has no compatibility flag "${flag[2]}": misspelt, or newer than this workerd (celld --version shows which it is)`,
      });
      return;
    }
    const entrypoint = missingEntrypoint.exec(line);
    const bindingWorker = entrypoint === null ? undefined : this.#workers.get(entrypoint[1]!);
    if (entrypoint !== null && bindingWorker !== undefined) {
      const index = bindingWorker.services.findIndex((s) => s.binding === entrypoint[2]);
      this.issues.push({
        file: bindingWorker.configPath,
        path: index === -1 ? "services" : `services[${index}].entrypoint`,
        message:
          `Worker "${entrypoint[3]}" exports no entrypoint named "${entrypoint[4]}" (a WorkerEntrypoint class or an ` +
          "object of handlers); without entrypoint, the binding calls its default export",
      });
    }
  }
}
