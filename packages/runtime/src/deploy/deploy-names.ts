import { DeployError } from "./deploy-errors.ts";

/**
 * Names that become paths in the data directory are checked before they are used: a Worker's
 * name, a version id and a module's name can never climb out of their directory.
 */

// Cloudflare's rule for Worker names: lower-case letters, digits, dashes and underscores, at most 63.
const scriptNamePattern = /^[a-z0-9_][a-z0-9_-]{0,62}$/;
const versionIdPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const moduleNameBytesMax = 512;

export function checkScriptName(name: string): string {
  if (!scriptNamePattern.test(name)) {
    throw new DeployError(
      "invalid_request",
      `Worker name ${JSON.stringify(name)} is not valid: use 1 to 63 lower-case letters, digits, "-" or "_", not starting with "-"`,
    );
  }
  return name;
}

export function isVersionId(id: string): boolean {
  return versionIdPattern.test(id);
}

export function checkVersionId(id: string): string {
  if (!isVersionId(id)) throw new DeployError("version_not_found", `version id ${JSON.stringify(id)} is not a version id (a UUID such as 0b7a1f3e-...)`);
  return id;
}

/**
 * A module's name as wrangler sends it (`index.js`, `./<hash>-hello.txt`, `lib/util.js`), without
 * a leading `./`: relative, `/`-separated, no `.` or `..` segment, no empty segment.
 */
export function checkModuleName(name: string): string {
  const plain = name.startsWith("./") ? name.slice(2) : name;
  const segments = plain.split("/");
  const bad =
    plain.length === 0 ||
    Buffer.byteLength(plain) > moduleNameBytesMax ||
    plain.includes("\\") ||
    plain.includes("\0") ||
    segments.some((s) => s === "" || s === "." || s === "..");
  if (bad) {
    throw new DeployError(
      "invalid_upload",
      `module name ${JSON.stringify(name)} is not valid: a relative path of at most ${moduleNameBytesMax} bytes with no empty, "." or ".." segment`,
    );
  }
  return plain;
}
