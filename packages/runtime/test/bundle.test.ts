import { cpSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BundleError, bundleWorker } from "../src/bundle/bundle.ts";
import { loadDeployment, parseDeployment, type WorkerConfig } from "../src/config/index.ts";
import { handlerErrorShim } from "../src/worker-code/handler-error-shim.ts";

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

/** Writes files (text or bytes) under `dir` of the copied fixtures. */
function writeIn(dir: string, files: Record<string, string | Uint8Array>): void {
  for (const [name, contents] of Object.entries(files)) {
    const path = join(root, dir, name);
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, contents);
  }
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
    const { code, modules, additionalModules } = await bundleWorker(worker!);
    expect(modules).toBe(true);
    expect(additionalModules).toEqual([]);
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

describe("bundleWorker with wrangler's default module rules", () => {
  const wasm = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]);
  const data = new Uint8Array([0, 1, 2, 254, 255]);

  beforeAll(() => {
    writeIn("module-rules", {
      "src/index.js": [
        'import note from "./note.txt";',
        'import page from "./pages/page.html";',
        'import query from "./query.sql";',
        'import data from "./data.bin";',
        'import wasm from "./add.wasm";',
        'import sameWasm from "./add.wasm?module";',
        'import shared from "../assets/shared.html";',
        'import packaged from "tiny-wasm/add.wasm";',
        "export default { note, page, query, data, wasm, sameWasm, shared, packaged };",
        "",
      ].join("\n"),
      "src/note.txt": "a note",
      "src/pages/page.html": "<p>page</p>",
      "src/query.sql": "SELECT 1;",
      "src/data.bin": data,
      "src/add.wasm": wasm,
      "assets/shared.html": "<p>shared</p>",
      // A package that exports its .wasm file under another path.
      "node_modules/tiny-wasm/package.json": JSON.stringify({ name: "tiny-wasm", exports: { "./add.wasm": "./dist/add.wasm" } }),
      "node_modules/tiny-wasm/dist/add.wasm": wasm,
      "src/missing.js": 'export { default } from "./other.js";\n',
      "src/other.js": 'import page from "./nowhere.html";\nexport default page;\n',
      "src/service-worker.js": 'import note from "./note.txt";\naddEventListener("fetch", (e) => e.respondWith(new Response(note)));\n',
    });
  });

  test("text, data and wasm imports stay imports of modules named relative to main's directory", async () => {
    const { code, modules, additionalModules } = await bundleWorker(workerIn("module-rules", "src/index.js"));
    expect(modules).toBe(true);
    for (const name of ["note.txt", "pages/page.html", "query.sql", "data.bin", "add.wasm"]) {
      expect(code).toContain(`from "./${name}"`);
    }
    expect(code).not.toContain("?module");
    const byName = new Map(additionalModules.map((m) => [m.name, m]));
    const src = join(root, "module-rules", "src");
    expect(byName.get("note.txt")).toEqual({
      type: "Text",
      name: "note.txt",
      file: join(src, "note.txt"),
      contents: new TextEncoder().encode("a note"),
    });
    expect(byName.get("pages/page.html")).toMatchObject({ type: "Text", file: join(src, "pages", "page.html") });
    expect(byName.get("query.sql")).toMatchObject({ type: "Text" });
    expect(byName.get("data.bin")).toMatchObject({ type: "Data", contents: data });
    // `./add.wasm` and `./add.wasm?module` are the same module.
    expect(byName.get("add.wasm")).toMatchObject({ type: "CompiledWasm", contents: wasm });
    expect(additionalModules).toHaveLength(7);
  });

  test("a file outside main's directory gets wrangler's hashed name, which workerd accepts", async () => {
    const { code, additionalModules } = await bundleWorker(workerIn("module-rules", "src/index.js"));
    const shared = additionalModules.find((m) => m.file === join(root, "module-rules", "assets", "shared.html"));
    expect(shared?.name).toMatch(/^[0-9a-f]{40}-shared\.html$/);
    expect(code).toContain(`from "./${shared?.name}"`);
    // A package's file is found by esbuild's resolution, through the package's exports.
    const packaged = additionalModules.find((m) => m.file.endsWith(join("node_modules", "tiny-wasm", "dist", "add.wasm")));
    expect(packaged).toMatchObject({ type: "CompiledWasm", contents: wasm });
    expect(packaged?.name).toMatch(/^[0-9a-f]{40}-add\.wasm$/);
    for (const m of additionalModules) expect(m.name.split("/")).not.toContain("..");
  });

  test("the consumer's shimmed bundle carries the same modules under the same names", async () => {
    const worker = workerIn("module-rules", "src/index.js");
    const plain = await bundleWorker(worker);
    const shimmed = await bundleWorker(worker, { entrySource: handlerErrorShim(worker.main) });
    expect(shimmed.additionalModules).toEqual(plain.additionalModules);
    expect(shimmed.exports).toContain("default");
    // What `celld dev --watch` watches: the same files, none of them the shim's own source.
    expect(shimmed.inputs.sort()).toEqual(plain.inputs.sort());
  });

  test("inputs are the files the bundle was built from: main, what it imports, npm packages' files and module-rules files", async () => {
    const [app] = loadDeployment([join(root, "app", "wrangler.toml")]).workers;
    const { inputs } = await bundleWorker(app!);
    expect(inputs).toContain(join(root, "app", "src", "index.ts"));
    expect(inputs).toContain(join(root, "app", "src", "greeting.ts"));
    expect(inputs.some((input) => input.startsWith(join(root, "app", "node_modules", "tiny-greet")))).toBe(true);
    for (const input of inputs) expect(input.startsWith(join(root, "app"))).toBe(true);

    const { inputs: withModules, additionalModules } = await bundleWorker(workerIn("module-rules", "src/index.js"));
    for (const m of additionalModules) expect(withModules).toContain(m.file);
    expect(withModules).toContain(join(root, "module-rules", "src", "index.js"));
  });

  test("an import of a missing file is refused, naming the importing file and line", async () => {
    const error = await bundleError(workerIn("module-rules", "src/missing.js"));
    const file = join(root, "module-rules", "src", "other.js");
    expect(error.messages).toEqual([{ file, line: 1, column: 18, text: 'Could not resolve "./nowhere.html"' }]);
    expect(error.message).toBe(`could not bundle Worker "module-rules":\n${file}:1:18: Could not resolve "./nowhere.html"`);
  });

  test("a service-worker script bundles as before: a .txt is inlined, no modules", async () => {
    const { code, modules, additionalModules } = await bundleWorker(workerIn("module-rules", "src/service-worker.js"));
    expect(modules).toBe(false);
    expect(additionalModules).toEqual([]);
    expect(code).toContain('"a note"');
    expect(code).not.toMatch(/\bimport\b/);
  });
});
