/**
 * Which lines of workerd's output reach the host's log. workerd reports some failures in a form
 * that helps nobody writing a Worker, next to a better report of the same failure:
 *   - the native stack after an uncaught exception (addresses in the workerd binary);
 *   - its "Uncaught exception" line for an error a fetch() handler threw, which the handler shim
 *     (handler-error-shim.ts) has just reported with the script's own stack; and the same for a
 *     service-worker script's "fetch" listener (service-worker-shim.ts).
 * Everything else passes: a Worker's console output, workerd's warnings, and any uncaught
 * exception the shim did not report (thrown outside a handler, or by a script it cannot wrap).
 */
export class RuntimeOutputFilter {
  /** The first line of the error the shim last reported for a fetch() handler. */
  private lastFetchError: string | undefined;

  shows(line: string, stream: "stdout" | "stderr"): boolean {
    if (stream === "stdout") return true;
    if (nativeStack.test(line)) return false;
    const reported = shimFetchReport.exec(line);
    if (reported !== null) {
      this.lastFetchError = reported[1];
      return true;
    }
    const uncaught = uncaughtException.exec(line);
    if (uncaught !== null && uncaught[1] === this.lastFetchError) {
      this.lastFetchError = undefined;
      return false;
    }
    return true;
  }
}

const nativeStack = /^stack:( \S+@[0-9a-f]+)+$/;
// The shim's own line: "[celld] fetch() handler for GET /path threw: TypeError: message"; for a
// service-worker script's listener (service-worker-shim.ts), what it threw or its response rejected with.
const shimFetchReport =
  /^\[celld\] (?:fetch\(\) handler(?: for .*)? threw|"fetch" listener(?: for .*)? threw|the event\.respondWith\(\) promise of the "fetch" listener(?: for .*)? rejected): (.*)$/;
// workerd's: "workerd/server/server.c++:5492: error: Uncaught exception: <where>: failed: remote.jsg.TypeError: message".
const uncaughtException = /: error: Uncaught exception: .*?: failed: (?:remote\.)?(?:jsg\.)?(.*)$/;
