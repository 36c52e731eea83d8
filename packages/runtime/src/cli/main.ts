import { UsageError, parseDevArgs, parseKeysArgs, usage } from "./args.ts";
import { closestKey } from "../config/closest-key.ts";
import { d1, parseD1Args } from "./d1.ts";
import { dev } from "./dev.ts";
import { serve } from "./serve.ts";
import { parseServeArgs } from "./serve-args.ts";
import { exitStatus } from "./exit-status.ts";
import { keys } from "./keys.ts";
import { describeStartFailure, printFailureLines } from "./start-failure.ts";
import { versionText } from "./version.ts";

const commands = ["dev", "serve", "keys", "d1", "help", "version"];
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
    case "serve":
      return serve(parseServeArgs(rest, process.cwd(), process.env));
    case "keys":
      return keys(parseKeysArgs(rest, process.cwd()));
    case "d1":
      return d1(parseD1Args(rest, process.cwd(), process.env));
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
  const failure = describeStartFailure(error);
  if (error instanceof UsageError) {
    console.error(`celld: ${(error as Error).message}\n\n${usage}`);
    process.exitCode = exitStatus.usage;
  } else if (failure !== undefined) {
    printFailureLines(failure.lines);
    process.exitCode = failure.status;
  } else {
    console.error("celld: failed:", error);
    process.exitCode = exitStatus.failed;
  }
}
