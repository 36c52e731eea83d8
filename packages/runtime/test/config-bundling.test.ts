import { describe, expect, test } from "vitest";
import { formatWarnings } from "../src/config/index.ts";
import { arrangeModuleRules, globPattern, ruleFor } from "../src/config/module-rules.ts";
import { issuesOf, parseOne } from "./config-failure.ts";

const parse = parseOne;

describe("define and alias, as wrangler hands them to esbuild", () => {
  test("are read into the model, with no warning", () => {
    const deployment = parse({ define: { "process.env.MODE": '"dev"', DEBUG: "false" }, alias: { lib: "./shim.js" } });
    expect(deployment.workers[0]).toMatchObject({ define: { "process.env.MODE": '"dev"', DEBUG: "false" }, alias: { lib: "./shim.js" } });
    expect(deployment.warnings).toEqual([]);
    expect(parse({}).workers[0]).toMatchObject({ define: {}, alias: {} });
  });

  test("a define esbuild would refuse is refused at load, by key, saying why", () => {
    expect(issuesOf({ define: { VERSION: "1.0 beta", "a b": "1", OK: "1.0" } })).toEqual([
      `define.VERSION: the value must be an identifier, a dotted name or a JS literal, got "1.0 beta"; a string keeps its quotes, as '"text"' ` +
        "(esbuild: Invalid define value (must be an entity name or JS literal): 1.0 beta)",
      'define["a b"]: the name must be an identifier or a dotted name such as process.env.MODE (esbuild: Expected "." but found "b")',
    ]);
    // esbuild is asked once every value is a string.
    expect(issuesOf({ define: { N: 1, "a b": "1" }, alias: { lib: "", x: 2 } })).toEqual([
      "define.N: must be a string, got 1",
      "alias.lib: must not be empty",
      "alias.x: must be a string, got 2",
    ]);
    expect(issuesOf({ define: ["X"] })).toEqual(["define: must be an object (TOML table), got an array"]);
  });
});

describe("the wrangler keys celld does not act on", () => {
  test("each says what differs and what to do", () => {
    const deployment = parse({
      build: { command: "npm run build" },
      tsconfig: "tsconfig.worker.json",
      node_compat: true,
      minify: true,
      no_bundle: true,
      site: { bucket: "./public" },
      tail_consumers: [{ service: "tail" }],
    });
    expect(formatWarnings(deployment.warnings)).toEqual([
      "w.json: build: is not run: celld does not run [build] command, so run it yourself before celld dev; otherwise " +
        "celld bundles `main` as the last build left it (stale, or missing)",
      "w.json: tsconfig: is not passed to esbuild: celld's esbuild reads, for each source file, the tsconfig.json nearest " +
        "above it (paths, baseUrl, jsx settings); settings only in this file do not apply",
      'w.json: node_compat: is ignored: celld does not add wrangler\'s legacy Node.js polyfills; add "nodejs_compat" to ' +
        "compatibility_flags to have workerd provide the Node.js built-ins",
      "w.json: minify: is ignored: celld does not minify the bundle (wrangler's default); the code runs the same, only larger",
      "w.json: no_bundle: is ignored: celld always bundles `main` and its imports into one module; files wrangler would " +
        "upload as they are are bundled",
      "w.json: site: is not supported (Workers Sites): the bucket is not served, env.__STATIC_CONTENT is undefined and an " +
        "import of __STATIC_CONTENT_MANIFEST fails to bundle; move the files to [assets], which celld serves",
      "w.json: tail_consumers: is ignored: celld runs no Tail Workers, so the Workers named here get no tail() events from this one",
    ]);
  });
});

describe("[[rules]], before wrangler's defaults", () => {
  test("are read into the model, in order; a rule that replaces a default is said to, unless it says fallthrough = false", () => {
    const rules = [
      { type: "Text", globs: ["**/*.md"], fallthrough: true },
      { type: "Data", globs: ["**/*.png", "**/*.jpg"] },
    ];
    const deployment = parse({ rules });
    expect(deployment.workers[0]?.moduleRules).toEqual(rules);
    // The Data rule replaces wrangler's default Data rule (.bin): that is said, once.
    expect(formatWarnings(deployment.warnings)).toEqual([
      'w.json: rules[1]: is the last Data rule, since it does not set fallthrough = true, so wrangler\'s default Data rule ("**/*.bin") ' +
        "is not used, and an import only it matches fails to bundle; set fallthrough = true to use them too, or fallthrough = false to say this is meant",
    ]);
    expect(parse({ rules: [{ type: "Data", globs: ["**/*.png"], fallthrough: false }] }).warnings).toEqual([]);
  });

  test("rules shadowed by one of their type are listed on it; ESModule and CommonJS rules are named as ignored", () => {
    const rules = [
      { type: "Text", globs: ["**/*.md"] },
      { type: "Text", globs: ["**/*.csv"] },
      { type: "ESModule", globs: ["**/*.mjs"] },
    ];
    expect(formatWarnings(parse({ rules }).warnings)).toEqual([
      'w.json: rules[2].type: "ESModule" rules only apply when wrangler does not bundle (no_bundle, find_additional_modules); ' +
        "celld always bundles, so this rule is ignored",
      'w.json: rules[0]: is the last Text rule, since it does not set fallthrough = true, so rules[1] (Text: "**/*.csv") and ' +
        'wrangler\'s default Text rule ("**/*.txt", "**/*.html", "**/*.sql") are not used, and an import only they match fails to ' +
        "bundle; set fallthrough = true to use them too, or fallthrough = false to say this is meant",
    ]);
  });

  test("each rule has wrangler's shape; Python rules are refused", () => {
    expect(issuesOf({ rules: [{ type: "PythonModule", globs: ["**/*.py"] }, { globs: "*.md", fallthrough: "yes" }] })).toEqual([
      'rules[0].type: must be one of "Text", "Data", "CompiledWasm", "ESModule", "CommonJS" (celld runs no Python Workers), got "PythonModule"',
      "rules[1].type: is required",
      'rules[1].globs: must be an array, got "*.md"',
      'rules[1].fallthrough: must be a boolean, got "yes"',
    ]);
  });
});

describe("how rules are arranged and matched, as wrangler does", () => {
  test("a glob matches the whole import specifier; * and ** match any run, slashes included; ? is literal", () => {
    const matches = (glob: string, specifier: string) => new RegExp(globPattern(glob)).test(specifier);
    expect(matches("**/*.txt", "./a/b.txt")).toBe(true);
    expect(matches("**/*.txt", "b.txt")).toBe(false);
    expect(matches("*.txt", "./a/b.txt")).toBe(true);
    expect(matches("**/*.wasm?module", "./add.wasm?module")).toBe(true);
    expect(matches("**/*.wasm?module", "./add.wasmXmodule")).toBe(false);
    expect(matches("**/data.[ch]", "./data.c")).toBe(false);
    expect(matches("**/data.[ch]", "./data.[ch]")).toBe(true);
  });

  test("a default shadowed by a rule marked fallthrough = false is dropped; a shadowed config rule still fails an import", () => {
    const arranged = arrangeModuleRules([
      { type: "Text", globs: ["**/*.md"], fallthrough: false },
      { type: "Text", globs: ["**/*.csv"] },
    ]);
    expect(ruleFor(arranged, "./a.md")).toMatchObject({ used: true, rule: { type: "Text" } });
    expect(ruleFor(arranged, "./a.csv")).toMatchObject({ used: false, origin: 1, by: 0 });
    // Left to esbuild, which inlines a .txt and refuses the other extensions.
    expect(ruleFor(arranged, "./a.txt")).toBeUndefined();
    expect(ruleFor(arranged, "./a.bin")).toMatchObject({ used: true, rule: { type: "Data" } });
  });
});
