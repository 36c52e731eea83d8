import { isBundleError, formatBundleMessage } from "../bundle.ts";
import { ApiError } from "../api/index.ts";
import { UsageError, parseDevArgs, parseKeysArgs, usage } from "./args.ts";
import { closestKey } from "../config/closest-key.ts";
import { RuntimeStartError } from "../host/runtime-start.ts";
import { dev } from "./dev.ts";
import { exitStatus } from "./exit-status.ts";
import { keys } from "./keys.ts";
import { versionText } from "./version.ts";

const commands = ["dev", "keys", "help", "version"];
/** Errors whose message says all a user needs: printed alone, without a stack. */
const ownErrors = new Set(["ERR_ADDRESS_IN_USE", "ERR_DATA_DIR_IN_USE", "ERR_RUNTIME_START"]);
/**
 * workerd refused a key of the config (an unknown compatibility flag, a missing entrypoint): the
 * files must change before a start can succeed. A refusal it names no key for (a module that
 * throws at its top level, or workerd failing for its own reasons) may be passing, and stays 1.
 */
const blamesConfig = (error: unknown): boolean => error instanceof RuntimeStartError && error.issues.length > 0;
/** Asked for anywhere on the line, as most CLIs allow (`celld dev --help`). */
const helpFlags = new Set(["--help", "-h"]);

async function main(argv: string[]): Promise<number> {
  if (argv.some((arg) => helpFlags.has(arg))) {
    console.log(usage);
    return exitStatus.ok;
  }
  const [command, ...rest] = argv;
  switch (command) {
    case "dev":
      return dev(parseDevArgs(rest, process.cwd(), process.env));
    case "keys":
      return keys(parseKeysArgs(rest, process.cwd()));
    case "version":
    case "--version":
    case "-v":
      console.log(versionText());
      return exitStatus.ok;
    case undefined:
      throw new UsageError('no command given; "celld dev" runs your Workers');
    case "help":
      console.log(usage);
      return exitStatus.ok;
    default: {
      const meant = closestKey(command, commands);
      throw new UsageError(`unknown command "${command}"${meant === undefined ? "" : ` (did you mean "${meant}"?)`}`);
    }
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  if (error instanceof UsageError) {
    console.error(`celld: ${(error as Error).message}\n\n${usage}`);
    process.exitCode = exitStatus.usage;
  } else if (ownErrors.has((error as { code?: string }).code ?? "")) {
    console.error(`celld: ${(error as Error).message}`);
    process.exitCode = blamesConfig(error) ? exitStatus.config : exitStatus.failed;
  } else if (error instanceof ApiError) {
    console.error(`celld: ${error.message}`);
    process.exitCode = exitStatus.failed;
  } else if (isBundleError(error)) {
    console.error(`celld: the Worker could not be bundled:`);
    for (const m of error.messages) console.error(`  ${formatBundleMessage(m)}`);
    process.exitCode = exitStatus.config;
  } else {
    console.error("celld: failed:", error);
    process.exitCode = exitStatus.failed;
  }
}
