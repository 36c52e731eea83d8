import { createRequire } from "node:module";
import { supportedCompatibilityDate } from "miniflare";
import { installedMiniflareVersion } from "../workerd/miniflare-version.ts";

/**
 * `celld --version`: celld's own version, and the runtime it runs Workers in. The newest
 * compatibility_date that runtime supports is the one a bug report or a date warning needs.
 */
export function versionText(): string {
  const here = createRequire(import.meta.url);
  const celld = (here("../../package.json") as { version: string }).version;
  // workerd is Miniflare's dependency, not celld's: resolved from Miniflare's own place.
  const workerd = createRequire(here.resolve("miniflare/package.json"))("workerd/package.json") as { version?: unknown };
  return [
    `celld ${celld}`,
    `workerd ${typeof workerd.version === "string" ? workerd.version : "unknown"} (compatibility dates up to ${supportedCompatibilityDate})`,
    `Miniflare ${installedMiniflareVersion()}`,
    `Node ${process.versions.node}`,
  ].join("\n");
}
