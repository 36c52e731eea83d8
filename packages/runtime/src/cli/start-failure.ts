import { formatBundleMessage, isBundleError } from "../bundle/bundle.ts";
import { ApiError } from "../api/index.ts";
import { RuntimeStartError } from "../workerd/runtime-start.ts";
import { exitStatus } from "./exit-status.ts";
import { SettingError } from "./cell-threads.ts";

/**
 * Errors whose message says all a user needs: printed alone, without a stack. A data directory
 * that cannot be written (a full disk) is the operator's to fix: its line names the directory and
 * the cause, and a stack would add nothing.
 */
const ownErrors = new Set(["ERR_ADDRESS_IN_USE", "ERR_DATA_DIR_IN_USE", "ERR_DATA_DIR_UNUSABLE", "ERR_RUNTIME_START"]);

/**
 * A start that failed in a way the user can act on: the lines to print (each after `celld: `
 * or indented under the first) and the exit status, or undefined for anything else (a bug, printed
 * with its stack). workerd refusing a key of the config (an unknown compatibility flag, a missing
 * entrypoint) and a Worker that cannot be bundled are the files' to mend (status 78); a refusal
 * workerd names no key for (a module that throws at its top level, or workerd failing for its own
 * reasons) may be passing, and is 1.
 */
export function describeStartFailure(error: unknown): { lines: string[]; status: number } | undefined {
  if (ownErrors.has((error as { code?: string } | null)?.code ?? "")) {
    const blamesConfig = error instanceof RuntimeStartError && error.issues.length > 0;
    return { lines: [(error as Error).message], status: blamesConfig ? exitStatus.config : exitStatus.failed };
  }
  if (error instanceof ApiError) return { lines: [error.message], status: exitStatus.failed };
  if (error instanceof SettingError) return { lines: [error.message], status: exitStatus.config };
  if (isBundleError(error)) {
    return {
      lines: ["the Worker could not be bundled:", ...error.messages.map((m) => `  ${formatBundleMessage(m)}`)],
      status: exitStatus.config,
    };
  }
  return undefined;
}

/** Prints a failure's lines to stderr: the first after `celld: `, the rest as they are. */
export function printFailureLines(lines: readonly string[]): void {
  const [first, ...rest] = lines;
  console.error(`celld: ${first}`);
  for (const line of rest) console.error(line);
}
