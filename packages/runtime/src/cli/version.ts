import { createRequire } from "node:module";
import { supportedCompatibilityDate } from "miniflare";

/** A package's version from its package.json, as `resolver` finds the package from its own place. */
function versionOf(resolver: NodeJS.Require, name: string): string {
  const pkg = resolver(`${name}/package.json`) as { version?: unknown };
  return typeof pkg.version === "string" ? pkg.version : "(unknown)";
}

/**
 * `celld --version`: celld's own version, and the runtime it runs Workers in. The newest
 * compatibility_date that runtime supports is the one a bug report or a date warning needs.
 */
export function versionText(): string {
  const here = createRequire(import.meta.url);
  // workerd is Miniflare's dependency, not celld's: resolved from Miniflare's own place.
  const fromMiniflare = createRequire(here.resolve("miniflare/package.json"));
  const celld = (here("../../package.json") as { version: string }).version;
  return [
    `celld ${celld}`,
    `workerd ${versionOf(fromMiniflare, "workerd")} (compatibility dates up to ${supportedCompatibilityDate})`,
    `Miniflare ${versionOf(here, "miniflare")}`,
    `Node ${process.versions.node}`,
  ].join("\n");
}
