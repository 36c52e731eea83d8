import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

/**
 * The fast half of the package test (the slow half installs the tarball:
 * package-install.slow.test.ts): the root manifest that `npm pack` reads names what an install
 * needs. A dependency added to a workspace package and not to the root would install a celld that
 * fails at its first import of it.
 */

const repo = join(import.meta.dirname, "..");
const workspaces = ["queue-cell", "bindings", "runtime"] as const;
interface Manifest {
  name: string;
  version?: string;
  private?: boolean;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  exports?: Record<string, string>;
}
const read = (path: string): Manifest => JSON.parse(readFileSync(join(repo, path), "utf8")) as Manifest;

describe("the celld package", () => {
  const root = read("package.json");

  it("is public, named celld, versioned as the runtime, its bin in the packed sources", () => {
    expect(root.name).toBe("celld");
    expect(root.private).toBeUndefined();
    expect(root.version).toBe(read("packages/runtime/package.json").version);
    expect(root.bin).toEqual({ celld: "packages/runtime/bin/celld.mjs" });
  });

  it("depends on every third-party package of its workspaces, at the same version", () => {
    const wanted: Record<string, string> = {};
    for (const ws of workspaces) {
      for (const [name, version] of Object.entries(read(`packages/${ws}/package.json`).dependencies ?? {})) {
        if (!name.startsWith("@celld/")) wanted[name] = version;
      }
    }
    expect(root.dependencies).toEqual(wanted);
  });

  it("packs each workspace's sources and exports, and no tests", async () => {
    const { stdout } = await promisify(execFile)("npm", ["pack", "--dry-run", "--json"], { cwd: repo, maxBuffer: 16 * 1024 * 1024 });
    const files = new Set((JSON.parse(stdout) as [{ files: { path: string }[] }])[0].files.map((f) => f.path));
    expect(files.has("packages/runtime/bin/celld.mjs")).toBe(true);
    expect(files.has("packages/runtime/bin/workspace-packages.mjs")).toBe(true);
    for (const ws of workspaces) {
      const manifest = read(`packages/${ws}/package.json`);
      expect(files.has(`packages/${ws}/package.json`)).toBe(true);
      for (const target of Object.values(manifest.exports ?? {})) {
        const path = join(`packages/${ws}`, target);
        expect(existsSync(join(repo, path)), path).toBe(true);
        expect(files.has(path), path).toBe(true);
      }
    }
    expect([...files].filter((f) => /(^|\/)(test|bench)\//.test(f))).toEqual([]);
  });
});
