/**
 * The one Miniflare release celld's patches of Miniflare internals (the queue wiring, the V8
 * flags) were written and tested against, and the installed one they compare it with.
 */
import { createRequire } from "node:module";

/** The miniflare release whose internals celld's patches were written and tested against. */
export const wiredMiniflareVersion = "4.20260426.0";

/** The installed miniflare's version. */
export function installedMiniflareVersion(): string {
  const pkg = createRequire(import.meta.url)("miniflare/package.json") as { version?: unknown };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}
