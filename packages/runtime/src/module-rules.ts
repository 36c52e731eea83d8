import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { basename, isAbsolute, relative, sep } from "node:path";
import type { Plugin } from "esbuild";

/**
 * wrangler's default module rules: an import of a text, data or WebAssembly file is not inlined
 * into the bundle but stays an import of a separate workerd module, so that the Worker gets the
 * types it gets on Cloudflare (a string, an ArrayBuffer, a WebAssembly.Module). The config's
 * `rules` key, which would change these, is not supported.
 */

export type AdditionalModuleType = "Text" | "Data" | "CompiledWasm";

/** A file that the bundle imports as a workerd module of its own. */
export interface AdditionalModule {
  type: AdditionalModuleType;
  /**
   * The module's name in workerd: relative to the directory of `main` (Miniflare's modulesRoot),
   * "/"-separated, never absolute and never climbing out with "..", which workerd refuses.
   */
  name: string;
  /** Absolute path of the file it was read from. */
  file: string;
  contents: Uint8Array<ArrayBuffer>;
}

// wrangler's globs (`**/*.txt`, `**/*.wasm?module`, ...) match the end of the import specifier;
// its `?` is literal, not a glob wildcard.
const defaultRules: readonly { type: AdditionalModuleType; suffixes: readonly string[] }[] = [
  { type: "Text", suffixes: [".txt", ".html", ".sql"] },
  { type: "Data", suffixes: [".bin"] },
  { type: "CompiledWasm", suffixes: [".wasm", ".wasm?module"] },
];

const wasmModuleSuffix = "?module";
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const ruleFilter = new RegExp(
  `(?:${defaultRules.flatMap((rule) => rule.suffixes).map(escapeRegExp).join("|")})$`,
);

/** The module type wrangler's default rules give an import specifier, if any. */
export function moduleTypeOf(specifier: string): AdditionalModuleType | undefined {
  return defaultRules.find((rule) => rule.suffixes.some((suffix) => specifier.endsWith(suffix)))?.type;
}

/**
 * A file inside `root` keeps its relative path as its name, which is stable and readable. One
 * outside it (`../assets/page.html` from `src/index.ts`, or a package under the project's
 * node_modules) gets wrangler's name, a hash of its contents and its base name, because workerd
 * refuses a module name with "..".
 */
export function additionalModuleName(root: string, file: string, contents: Uint8Array): string {
  const inside = relative(root, file);
  const name =
    inside !== "" && inside !== ".." && !inside.startsWith(`..${sep}`) && !isAbsolute(inside)
      ? inside.split(sep).join("/")
      : `${createHash("sha1").update(contents).digest("hex")}-${basename(file)}`;
  assert(!name.startsWith("/") && !name.split("/").includes(".."), `module name "${name}" leaves modulesRoot`);
  return name;
}

/**
 * Resolves each import that a default rule matches to an external `./<name>` and records the file
 * in `collected` (by name), for the caller to hand to workerd next to the bundle. The bundle is
 * one module at the root of modulesRoot, so `./<name>` resolves to `<name>` there.
 */
export function moduleRulesPlugin(root: string, collected: Map<string, AdditionalModule>): Plugin {
  // Marks the plugin's own build.resolve() call so that it is not handled again.
  const resolving = Symbol("celld-module-rules");
  return {
    name: "celld-module-rules",
    setup(b) {
      b.onResolve({ filter: ruleFilter }, async (args) => {
        // require() of an external module would fail only at run time inside workerd; leave it to
        // esbuild, which inlines a .txt and refuses the others at bundle time, as before.
        if (args.pluginData === resolving || (args.kind !== "import-statement" && args.kind !== "dynamic-import")) {
          return undefined;
        }
        const type = moduleTypeOf(args.path);
        assert(type !== undefined, `the module rules filter matched "${args.path}" but no rule does`);
        const specifier = args.path.endsWith(wasmModuleSuffix) ? args.path.slice(0, -wasmModuleSuffix.length) : args.path;
        // esbuild's own resolution: relative paths, packages (with their exports), tsconfig paths.
        // Its errors ('Could not resolve "./x.html"') get the import's file and line from esbuild.
        const resolved = await b.resolve(specifier, {
          kind: args.kind,
          importer: args.importer,
          resolveDir: args.resolveDir,
          pluginData: resolving,
        });
        if (resolved.errors.length > 0) return { errors: resolved.errors };
        if (resolved.external) return { path: resolved.path, external: true };
        const contents = new Uint8Array(await readFile(resolved.path));
        const name = additionalModuleName(root, resolved.path, contents);
        collected.set(name, { type, name, file: resolved.path, contents });
        return { path: `./${name}`, external: true, watchFiles: [resolved.path] };
      });
    },
  };
}
