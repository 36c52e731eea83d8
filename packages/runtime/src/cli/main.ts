import { isBundleError, formatBundleMessage } from "../bundle.ts";
import { ApiError } from "../api/index.ts";
import { UsageError, parseDevArgs, parseKeysArgs, usage } from "./args.ts";
import { closestKey } from "../config/closest-key.ts";
import { dev } from "./dev.ts";
import { keys } from "./keys.ts";
import { versionText } from "./version.ts";

const commands = ["dev", "keys", "help", "version"];
/** Errors whose message says all a user needs: printed alone, without a stack. */
const ownErrors = new Set(["ERR_ADDRESS_IN_USE", "ERR_DATA_DIR_IN_USE", "ERR_RUNTIME_START"]);
/** Asked for anywhere on the line, as most CLIs allow (`celld dev --help`). */
const helpFlags = new Set(["--help", "-h"]);

async function main(argv: string[]): Promise<number> {
  if (argv.some((arg) => helpFlags.has(arg))) {
    console.log(usage);
    return 0;
  }
  const [command, ...rest] = argv;
  switch (command) {
    case "dev":
      return dev(parseDevArgs(rest, process.cwd()));
    case "keys":
      return keys(parseKeysArgs(rest, process.cwd()));
    case "version":
    case "--version":
    case "-v":
      console.log(versionText());
      return 0;
    case undefined:
      throw new UsageError('no command given; "celld dev" runs your Workers');
    case "help":
      console.log(usage);
      return 0;
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
    process.exitCode = 2;
  } else if (ownErrors.has((error as { code?: string }).code ?? "")) {
    console.error(`celld: ${(error as Error).message}`);
    process.exitCode = 1;
  } else if (error instanceof ApiError) {
    console.error(`celld: ${error.message}`);
    process.exitCode = 1;
  } else if (isBundleError(error)) {
    console.error(`celld: the Worker could not be bundled:`);
    for (const m of error.messages) console.error(`  ${formatBundleMessage(m)}`);
    process.exitCode = 1;
  } else {
    console.error("celld: failed:", error);
    process.exitCode = 1;
  }
}
