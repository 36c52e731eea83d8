import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

// The layers DESIGN.md draws: runtime -> bindings -> queue-cell, never upward; inside queue-cell,
// the cell's rules know storage only through store.ts; inside runtime, the wire code the client
// shares with the API server imports neither of them. Read from the import specifiers of every
// source file, as written (static imports and exports, dynamic imports).

const root = fileURLToPath(new URL("../", import.meta.url));
const packages = ["queue-cell", "bindings", "runtime"] as const;
type Package = (typeof packages)[number];
/** What each package may import of the others. */
const allowed: Record<Package, readonly Package[]> = {
  "queue-cell": [],
  bindings: ["queue-cell"],
  runtime: ["bindings", "queue-cell"],
};

interface Import {
  file: string;
  specifier: string;
  /** The file it names, for a relative specifier. */
  target?: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

const specifierPattern = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*["']([^"']+)["']|(?:^|[\s;])import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g;

function importsOf(file: string): Import[] {
  const text = readFileSync(file, "utf8");
  const found: Import[] = [];
  for (const match of text.matchAll(specifierPattern)) {
    const specifier = match[1] ?? match[2] ?? match[3]!;
    const target = specifier.startsWith(".") ? resolve(dirname(file), specifier) : undefined;
    found.push({ file: relative(root, file), specifier, ...(target === undefined ? {} : { target }) });
  }
  return found;
}

const srcOf = (pkg: Package): string => join(root, "packages", pkg, "src");
const importsIn = (pkg: Package): Import[] => sourceFiles(srcOf(pkg)).flatMap(importsOf);

/** The package a specifier or a resolved path reaches, if one of ours. */
function packageReached(imp: Import): Package | undefined {
  const named = /^@celld\/([^/]+)/.exec(imp.specifier)?.[1];
  if (named !== undefined) return packages.find((pkg) => pkg === named);
  if (imp.target === undefined) return undefined;
  return packages.find((pkg) => imp.target!.startsWith(join(root, "packages", pkg) + "/"));
}

describe("package layers", () => {
  test("the scan finds imports (bindings imports @celld/queue-cell)", () => {
    expect(importsIn("bindings").some((imp) => imp.specifier === "@celld/queue-cell")).toBe(true);
    expect(importsIn("queue-cell").length).toBeGreaterThan(50);
  });

  test.each(packages)("%s imports no package above it, and reaches none by a relative path", (pkg) => {
    const wrong = importsIn(pkg)
      .map((imp) => ({ imp, reached: packageReached(imp) }))
      .filter(({ reached }) => reached !== undefined && reached !== pkg && !allowed[pkg].includes(reached))
      .map(({ imp }) => `${imp.file}: ${imp.specifier}`);
    const escaping = importsIn(pkg)
      .filter((imp) => imp.target !== undefined && !imp.target.startsWith(join(root, "packages", pkg) + "/"))
      .map((imp) => `${imp.file}: ${imp.specifier}`);
    expect(wrong).toEqual([]);
    expect(escaping).toEqual([]);
  });

  test("the cell's rules know storage only through store.ts (SQLite is chosen in sqlite-queue-cell.ts)", () => {
    const rules = ["queue-cell.ts", "dead-letter-mover.ts", "cell-time.ts", "cell-calls.ts", "write-loop.ts", "lease-waiters.ts"];
    const wrong = rules
      .flatMap((name) => importsOf(join(srcOf("queue-cell"), name)))
      .filter((imp) => imp.specifier === "better-sqlite3" || /(^|\/)(sqlite-|wal-|file-)[^/]*$/.test(imp.specifier))
      .map((imp) => `${imp.file}: ${imp.specifier}`);
    expect(wrong).toEqual([]);
  });

  test("runtime's wire code imports nothing of the server, the client, the host or the cell's main entry", () => {
    const wire = join(srcOf("runtime"), "wire");
    const wrong = sourceFiles(wire)
      .flatMap(importsOf)
      .filter((imp) =>
        imp.target !== undefined ? !imp.target.startsWith(wire + "/") : imp.specifier.startsWith("@celld/") && imp.specifier !== "@celld/queue-cell/limits",
      )
      .map((imp) => `${imp.file}: ${imp.specifier}`);
    expect(wrong).toEqual([]);
  });
});
