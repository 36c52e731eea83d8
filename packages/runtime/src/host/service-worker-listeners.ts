/**
 * Whether a service-worker script (no exports: addEventListener) adds a "queue" listener, read from
 * its bundle. workerd fails each batch for a script with none ("No event listener registered for
 * queue messages"), and says so only once a batch has failed; so the host says it at start, from
 * the bundle, as it does for a module without a default export. The bundle is esbuild's output,
 * which writes every string literal in double quotes and keeps no ordinary comments, so the calls
 * read alike however the author wrote them.
 *
 * "unknown" when a call names its event by anything but a literal (a variable, a template with ${}):
 * a warning then could be wrong, and says nothing.
 */
export function addsQueueListener(code: string): "yes" | "no" | "unknown" {
  let unknown = false;
  for (const call of code.matchAll(/\baddEventListener\(\s*([^,)]*)/g)) {
    const type = call[1]!.trim();
    if (type === '"queue"' || type === "`queue`") return "yes";
    // esbuild keeps a template literal as written; one with no ${} is as good as a string.
    if (!/^"[^"\\]*"$/.test(type) && !/^`[^`$\\]*`$/.test(type)) unknown = true;
  }
  return unknown ? "unknown" : "no";
}
