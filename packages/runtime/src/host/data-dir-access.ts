import { statSync } from "node:fs";

/**
 * The warning for a data directory that users other than its owner may enter, or undefined. celld
 * creates the directory 0700, but one an older celld made (0755) leaves `miniflare/` (the Workers'
 * KV, D1, R2 and Durable Object data) readable to every local user. Its mode is the operator's to
 * change: a group may have been given it on purpose, so celld says so and changes nothing.
 */
export function dataDirAccessWarning(dataDir: string): string | undefined {
  const mode = statSync(dataDir).mode & 0o777;
  if ((mode & 0o077) === 0) return undefined;
  const others = (mode & 0o007) === 0 ? "its group" : "every local user";
  return (
    `the data directory ${dataDir} is mode ${mode.toString(8).padStart(4, "0")}: ${others} may read what is in it ` +
    `(the Workers' KV, D1, R2 and Durable Object data); make it this user's alone with: chmod 700 ${shellWord(dataDir)}`
  );
}

/** `path` as one word of a shell command, quoted only when it must be. */
function shellWord(path: string): string {
  return /^[A-Za-z0-9_./,:@%+=-]+$/.test(path) ? path : `'${path.replaceAll("'", `'\\''`)}'`;
}
