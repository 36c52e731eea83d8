import type { HandlerUse } from "./handler-error-shim.ts";

/**
 * Whether a service-worker script (no exports: addEventListener) adds a listener for `type`
 * ("queue" or "scheduled"), read from its bundle. workerd fails each batch, or each cron run, for a
 * script with none ("No event listener registered for queue messages"), and says so only once one
 * has failed; so the host says it at start, from the bundle, as it does for a module without a
 * default export. The bundle is esbuild's output, which writes every string literal in double
 * quotes and keeps no ordinary comments, so the calls read alike however the author wrote them.
 *
 * A call through the global scope's prototype (`addEventListener.call(self, "queue", ...)`, which
 * workerd accepts; see service-worker-shim.ts) names its event second. "unknown" when a call names
 * its event by anything but a literal (a variable, a template with ${}), or addEventListener is used
 * any other way (apply(), kept under another name): a warning then could be wrong, and says nothing.
 */
export function addsListener(code: string, type: HandlerUse["handler"]): "yes" | "no" | "unknown" {
  let unknown = false;
  for (const mention of code.matchAll(/\baddEventListener\b/g)) {
    callType.lastIndex = mention.index;
    const call = callType.exec(code);
    if (call === null) {
      unknown = true;
      continue;
    }
    const named = call[1]!.trim();
    if (named === `"${type}"` || named === `\`${type}\``) return "yes";
    // esbuild keeps a template literal as written; one with no ${} is as good as a string.
    if (!/^"[^"\\]*"$/.test(named) && !/^`[^`$\\]*`$/.test(named)) unknown = true;
  }
  return unknown ? "unknown" : "no";
}

/** The event type a call names: addEventListener(type, ...) or addEventListener.call(scope, type, ...). */
const callType = /addEventListener(?:\(\s*|\.call\(\s*[\w$.]+\s*,\s*)([^,)]*)/y;
