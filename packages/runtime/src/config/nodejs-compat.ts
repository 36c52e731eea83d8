/**
 * Whether a Worker has Node.js compatibility, read from its compatibility date and flags the way
 * workerd reads them (and wrangler since 4.122). From 2026-08-04 the date alone turns
 * `nodejs_compat` and `nodejs_compat_v2` on, so create-cloudflare stopped writing the flags; a
 * project that leaves them out must still bundle and run with Node.js built-ins here.
 */

/** The first compatibility date on which workerd enables both flags by itself. */
export const nodejsCompatDefaultOnDate = "2026-08-04";
/** From this date `nodejs_compat` implies `nodejs_compat_v2` (unless `no_nodejs_compat_v2`). */
const nodejsCompatV2SwitchOverDate = "2024-09-23";

export interface NodejsCompat {
  nodejsCompat: boolean;
  nodejsCompatV2: boolean;
}

export function resolveNodejsCompat(compatibilityDate: string, flags: readonly string[]): NodejsCompat {
  const byDate = compatibilityDate >= nodejsCompatDefaultOnDate;
  const nodejsCompat = flags.includes("nodejs_compat") || (byDate && !flags.includes("no_nodejs_compat"));
  const nodejsCompatV2 =
    flags.includes("nodejs_compat_v2") ||
    (!flags.includes("no_nodejs_compat_v2") && (byDate || (nodejsCompat && compatibilityDate >= nodejsCompatV2SwitchOverDate)));
  return { nodejsCompat, nodejsCompatV2 };
}

/**
 * The flags to hand workerd when it runs the Worker on `runDate`, which is older than the config's
 * date when this workerd does not know that date. What the config's date turned on by itself and
 * `runDate` does not is added as a flag; on a `runDate` that turns the flags on itself they are
 * dropped, as wrangler drops them, since workerd refuses a flag that its date made the default.
 */
export function runtimeCompatibilityFlags(compatibilityDate: string, flags: readonly string[], runDate: string): string[] {
  if (runDate >= nodejsCompatDefaultOnDate) return flags.filter((flag) => flag !== "nodejs_compat" && flag !== "nodejs_compat_v2");
  const wanted = resolveNodejsCompat(compatibilityDate, flags);
  const added: string[] = [];
  if (wanted.nodejsCompat && !resolveNodejsCompat(runDate, flags).nodejsCompat) added.push("nodejs_compat");
  // After the switch-over date nodejs_compat brings v2 along, so v2 is named only when still missing.
  if (wanted.nodejsCompatV2 && !resolveNodejsCompat(runDate, [...added, ...flags]).nodejsCompatV2) added.push("nodejs_compat_v2");
  return [...added, ...flags];
}
