import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, test } from "vitest";

// The HTTP client is imported by programs that talk to a celld elsewhere: it must not load the
// server's storage engine (better-sqlite3, a native module) along with it. Each import runs in a
// process of its own, so that nothing this test process loaded counts.
const probe = fileURLToPath(new URL("./client-light-probe.mjs", import.meta.url));
const root = fileURLToPath(new URL("../../../", import.meta.url));

interface Loaded {
  exports: string[];
  native: string[];
  cached: string[];
}

async function load(specifier: string): Promise<Loaded> {
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", probe, specifier], { cwd: root });
  return JSON.parse(stdout) as Loaded;
}

describe("@celld/runtime/client", () => {
  test("loads no native module, and none of better-sqlite3", async () => {
    const client = await load("@celld/runtime/client");
    expect(client.exports).toContain("QueuesClient");
    expect(client.native).toEqual([]);
    expect(client.cached).toEqual([]);
  });

  test("the probe sees better-sqlite3 where it is loaded: the cell package's main entry", async () => {
    const cell = await load("@celld/queue-cell");
    expect(cell.cached.some((path) => path.includes("better-sqlite3"))).toBe(true);
  });
});
