import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, expect, test } from "vitest";

/**
 * celld ships as one npm package: `npm pack` in the repo, then `npm install -g` of the tarball
 * into a fresh prefix (dependencies from the npm registry, no internet needed beyond it) gives a
 * working `celld`. Slow suite: the install compiles better-sqlite3 (about 10 minutes on the loaded
 * 2-core machine, ~13 min in all).
 */

const exec = promisify(execFile);
const repo = join(import.meta.dirname, "..");
const dirs: string[] = [];
const pids: number[] = [];
afterEach(() => {
  for (const pid of pids.splice(0)) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

test("npm pack, then npm install -g of the tarball, gives a celld that runs a Worker", async () => {
  const packDir = tempDir("celld-pack-");
  const prefix = tempDir("celld-prefix-");
  const cache = tempDir("celld-npm-cache-");
  await exec("npm", ["pack", "--pack-destination", packDir], { cwd: repo, maxBuffer: 64 * 1024 * 1024 });
  const [tarball] = readdirSync(packDir).filter((f) => f.endsWith(".tgz"));
  expect(tarball).toMatch(/^celld-\d+\.\d+\.\d+\.tgz$/);

  // Its own npm cache: nothing comes from this repo's node_modules.
  await exec("npm", ["install", "-g", "--prefix", prefix, "--cache", cache, "--no-audit", "--no-fund", join(packDir, tarball!)], {
    cwd: prefix,
    maxBuffer: 64 * 1024 * 1024,
    timeout: 1_500_000,
  });
  const bin = join(prefix, "bin", "celld");
  const installed = join(prefix, "lib", "node_modules", "celld");
  const version = (JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { version: string }).version;
  expect((await exec(bin, ["--version"], { cwd: prefix })).stdout).toMatch(new RegExp(`^celld ${version.replaceAll(".", "\\.")}\\nworkerd `));
  // The workspace packages come from the tarball's own sources, not from links into a checkout.
  expect(readdirSync(join(installed, "node_modules"))).not.toContain("@celld");

  const project = tempDir("celld-tiny-");
  mkdirSync(join(project, "src"));
  writeFileSync(join(project, "wrangler.toml"), 'name = "tiny"\nmain = "src/index.js"\ncompatibility_date = "2025-01-01"\n');
  writeFileSync(join(project, "src", "index.js"), 'export default { fetch() { return new Response("tiny, installed") } }');
  const dev = spawn(bin, ["dev", "-c", "wrangler.toml", "--port", "0", "--data", join(project, ".celld")], { cwd: project, detached: true });
  pids.push(dev.pid!);
  let output = "";
  dev.stdout.on("data", (d: Buffer) => (output += d.toString()));
  dev.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`celld dev did not listen:\n${output}`)), 120_000);
    const poll = setInterval(() => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match !== null) {
        clearInterval(poll);
        clearTimeout(deadline);
        resolve(match[1]!);
      }
    }, 50);
  });
  expect(await (await fetch(url)).text()).toBe("tiny, installed");
  const exited = new Promise((resolve) => dev.on("close", resolve));
  dev.kill("SIGTERM");
  expect(await exited).toBe(0);
  pids.splice(0);
});
