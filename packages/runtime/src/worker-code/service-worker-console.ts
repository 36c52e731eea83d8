/**
 * workerd prints a module Worker's console output on its stdout, but a service-worker script's
 * (addEventListener) only as an informational log line, and only with `--verbose`:
 *   workerd/io/worker.c++:2228: info: console.log(); message() = ["text", {"a":1}, 42]
 * whatever the console method (error, warn and debug alike). Without it such a Worker's output,
 * from any listener or its top level, reached no one. So a host with a service-worker script runs
 * workerd verbose and reads these lines back into the Worker's output, as wrangler dev shows it:
 * strings as they are, other values as JSON, separated by spaces. workerd's other informational
 * lines (a connection refused, each with a native stack) are dropped: they are what a Worker
 * without `--verbose` never shows either. Among them is its "uncaught exception" for what a
 * handler or listener threw, which names neither Worker nor batch: the shims (handler-error-shim.ts,
 * service-worker-shim.ts) report those errors, once, with the Worker's own stack.
 */
export class ServiceWorkerConsole {
  /** Inside a dropped informational line's continuation (an indented stack under it). */
  private inDropped = false;

  /**
   * For a line of workerd's stderr: the Worker's own output it carries, "drop" for workerd's other
   * informational lines and what continues them, or undefined for any other line (shown as ever).
   */
  read(line: string): { output: string } | "drop" | undefined {
    if (this.inDropped && /^\s/.test(line)) return "drop";
    this.inDropped = false;
    const logged = consoleLine.exec(line);
    if (logged !== null) {
      const output = consoleText(logged[1]!);
      if (output !== undefined) return { output };
    }
    if (!infoLine.test(line)) return undefined;
    this.inDropped = true;
    return "drop";
  }
}

const consoleLine = /^workerd\/io\/worker\.c\+\+:\d+: info: console\.log\(\); message\(\) = (\[.*\])$/;
const infoLine = /^workerd\/\S+:\d+: info: /;

/** The arguments as console.log would have printed them; undefined if they are not the JSON array workerd writes. */
function consoleText(json: string): string | undefined {
  let args: unknown;
  try {
    args = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (!Array.isArray(args)) return undefined;
  return args.map((arg) => (typeof arg === "string" ? arg : JSON.stringify(arg))).join(" ");
}
