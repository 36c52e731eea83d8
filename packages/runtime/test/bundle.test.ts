import { cpSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BundleError, bundleWorker } from "../src/bundle.ts";
import { loadDeployment, parseDeployment, type WorkerConfig } from "../src/config/index.ts";

const fixtures = fileURLToPath(new URL("./fixtures/bundle/", import.meta.url));

// The fixtures are bundled from a copy outside the repository: git keeps no node_modules (the app's
// packages live in vendor/), and the repository's own node_modules (which has an npm `buffer`)
// must not be found by walking up from the fixture.
let root = "";
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "celld-bundle-"));
  cpSync(fixtures, root, { recursive: true });
  renameSync(join(root, "app", "vendor"), join(root, "app", "node_modules"));
});
afterAll(() => {
  if (root !== "") rmSync(root, { recursive: true, force: true });
});

/** A Worker whose config sits in `dir` of the copied fixtures. */
function workerIn(dir: string, main: string, flags: string[] = []): WorkerConfig {
  const config = { name: dir, main, compatibility_date: "2024-09-23", compatibility_flags: flags };
  const [worker] = parseDeployment([{ path: join(root, dir, "wrangler.json"), text: JSON.stringify(config) }]).workers;
  if (worker === undefined) throw new Error("the fixture config yields no Worker");
  return worker;
}

async function bundleError(worker: WorkerConfig): Promise<BundleError> {
  const error: unknown = await bundleWorker(worker).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof BundleError)) throw new Error(`expected a BundleError, got ${String(error)}`);
  return error;
}

describe("bundleWorker", () => {
  test("a TypeScript main with a relative module and npm packages becomes one runnable ES module", async () => {
    const [worker] = loadDeployment([join(root, "app", "wrangler.toml")]).workers;
    const { code, modules } = await bundleWorker(worker!);
    expect(modules).toBe(true);
    expect(code).toMatch(/export\s*\{[^}]*as default/);
    expect(code).not.toMatch(/\bimport\b/);
    // The workerd export condition, and the browser main field, win over Node's entries.
    expect(code).toContain("greeting-module");
    expect(code).toContain("tiny-greet:workerd");
    expect(code).not.toContain("tiny-greet:node");
    expect(code).toContain("tiny-legacy:browser");
    expect(code).not.toContain("tiny-legacy:main");

    const loaded = (await import(`data:text/javascript,${encodeURIComponent(code)}`)) as {
      default: { fetch(request: Request, env: object): Promise<Response> };
    };
    const response = await loaded.default.fetch(new Request("http://x/"), { NAME: "celld" });
    expect(await response.text()).toBe("hello celld from greeting-module | tiny-greet:workerd | tiny-legacy:browser");
  });

  test.each(["nodejs_compat", "nodejs_compat_v2"])("with %s, node:buffer stays an import for workerd", async (flag) => {
    const { code, modules } = await bundleWorker(workerIn("node-import", "src/prefixed.js", [flag]));
    expect(code).toMatch(/import\s*\{\s*Buffer\s*\}\s*from\s*"node:buffer"/);
    expect(modules).toBe(true);
  });

  test("with nodejs_compat, a bare built-in import is rewritten to its node: name", async () => {
    const { code } = await bundleWorker(workerIn("node-import", "src/bare.js", ["nodejs_compat"]));
    expect(code).toMatch(/from\s*"node:buffer"/);
    expect(code).not.toMatch(/from\s*"buffer"/);
  });

  test("without nodejs_compat, a node: import is refused, naming the file and the flag", async () => {
    const error = await bundleError(workerIn("node-import", "src/prefixed.js"));
    const file = join(root, "node-import", "src", "prefixed.js");
    expect(error.code).toBe("ERR_BUNDLE");
    expect(error.messages).toEqual([
      {
        file,
        line: 1,
        column: 24,
        text: `"node:buffer" is a Node.js built-in module; add "nodejs_compat" to compatibility_flags to use it`,
      },
    ]);
    expect(error.message).toContain(`${file}:1:24: "node:buffer" is a Node.js built-in module`);
  });

  test("without nodejs_compat, a bare built-in that no package provides is refused the same way", async () => {
    const error = await bundleError(workerIn("node-import", "src/bare.js"));
    expect(error.messages).toMatchObject([{ file: join(root, "node-import", "src", "bare.js"), line: 1 }]);
    expect(error.messages[0]?.text).toContain('add "nodejs_compat" to compatibility_flags');
  });

  test("nodejs_als provides node:async_hooks and nothing else of Node", async () => {
    const { code } = await bundleWorker(workerIn("node-import", "src/async-local-storage.js", ["nodejs_als"]));
    expect(code).toMatch(/from\s*"node:async_hooks"/);
    const error = await bundleError(workerIn("node-import", "src/prefixed.js", ["nodejs_als"]));
    expect(error.messages[0]?.text).toContain("nodejs_compat");
  });

  test("a syntax error is refused with file:line:column and esbuild's text", async () => {
    const error = await bundleError(workerIn("broken", "src/index.js"));
    const file = join(root, "broken", "src", "index.js");
    expect(error.messages).toEqual([{ file, line: 3, column: 35, text: 'Expected ")" but found ";"' }]);
    expect(error.message).toBe(`could not bundle Worker "broken":\n${file}:3:35: Expected ")" but found ";"`);
  });

  test("a script with no exports is a service-worker script, not a module", async () => {
    const { code, modules } = await bundleWorker(workerIn("service-worker", "src/index.js"));
    expect(modules).toBe(false);
    expect(code).toContain("addEventListener");
  });
});
