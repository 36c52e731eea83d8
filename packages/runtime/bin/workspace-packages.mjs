// A module resolve hook for an installed celld (`npm install -g celld-<version>.tgz`): the tarball
// carries the workspace packages as source under packages/, with no node_modules/@celld links, so
// `@celld/<name>[/<subpath>]` is resolved here through that package's own "exports". In the repo
// the links exist and the default resolution answers first; this hook is then never consulted.
import { readFileSync } from "node:fs";

const packagesDir = new URL("../../", import.meta.url);

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    const target = specifier.startsWith("@celld/") ? workspaceTarget(specifier) : undefined;
    if (target === undefined) throw error;
    return nextResolve(target.href, context);
  }
}

function workspaceTarget(specifier) {
  const [, name, ...rest] = specifier.split("/");
  const root = new URL(`${name}/`, packagesDir);
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(new URL("package.json", root), "utf8"));
  } catch {
    return undefined;
  }
  const subpath = rest.length === 0 ? "." : `./${rest.join("/")}`;
  const file = typeof manifest.exports === "object" ? manifest.exports[subpath] : undefined;
  return typeof file === "string" ? new URL(file, root) : undefined;
}
