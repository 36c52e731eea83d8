import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { basename, isAbsolute, relative, sep } from "node:path";
import type { Plugin } from "esbuild";

/**
 * wrangler's module rules: an import of a text, data or WebAssembly file is not inlined into the
 * bundle but stays an import of a separate workerd module, so that the Worker gets the types it
 * gets on Cloudflare (a string, an ArrayBuffer, a WebAssembly.Module). The config's `rules` come
 * first, then wrangler's defaults, and the first rule of a type that does not fall through is the
 * last of that type: the ones after it are not used.
 */

export type AdditionalModuleType = "Text" | "Data" | "CompiledWasm";
/** ESModule and CommonJS rules only matter to wrangler without bundling: they are never applied. */
export type ModuleRuleType = AdditionalModuleType | "ESModule" | "CommonJS";

export interface ModuleRule {
  type: ModuleRuleType;
  globs: readonly string[];
  fallthrough?: boolean | undefined;
}

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

export const defaultModuleRules: readonly ModuleRule[] = [
  { type: "Text", globs: ["**/*.txt", "**/*.html", "**/*.sql"] },
  { type: "Data", globs: ["**/*.bin"] },
  { type: "CompiledWasm", globs: ["**/*.wasm", "**/*.wasm?module"] },
];

/** Where a rule came from: its index in the config's `rules`, or wrangler's defaults. */
export type RuleOrigin = number | "default";

export interface ArrangedRules {
  /** In order: the first whose glob matches an import decides its module type. */
  used: { rule: ModuleRule; origin: RuleOrigin }[];
  /**
   * Rules after the last rule of their type, with that rule (`by`, always one of the config's):
   * an import that only they match fails, since it would otherwise be inlined unnoticed.
   */
  unused: { rule: ModuleRule; origin: RuleOrigin; by: number }[];
}

/**
 * The config's rules, then wrangler's defaults, arranged as wrangler arranges them. A default
 * shadowed by a rule marked `fallthrough = false` is dropped without a trace: the user opted out
 * of it. ESModule and CommonJS rules take part, as in wrangler, but are never applied.
 */
export function arrangeModuleRules(configRules: readonly ModuleRule[]): ArrangedRules {
  const all = [
    ...configRules.map((rule, i) => ({ rule, origin: i as RuleOrigin })),
    ...defaultModuleRules.map((rule) => ({ rule, origin: "default" as RuleOrigin })),
  ];
  const lastOfType = new Map<ModuleRuleType, { rule: ModuleRule; origin: RuleOrigin }>();
  const used: ArrangedRules["used"] = [];
  const unused: ArrangedRules["unused"] = [];
  for (const entry of all) {
    const last = lastOfType.get(entry.rule.type);
    if (last === undefined) {
      if (!isJavaScriptRule(entry.rule)) used.push(entry);
      if (entry.rule.fallthrough !== true) lastOfType.set(entry.rule.type, entry);
    } else if (!isJavaScriptRule(entry.rule) && !(last.rule.fallthrough === false && entry.origin === "default")) {
      // Only a config rule stops its type: the defaults are last, one of each type.
      assert(typeof last.origin === "number", `default rule of type ${entry.rule.type} shadows another`);
      unused.push({ ...entry, by: last.origin });
    }
  }
  return { used, unused };
}

export function isJavaScriptRule(rule: ModuleRule): boolean {
  return rule.type === "ESModule" || rule.type === "CommonJS";
}

/**
 * wrangler's glob (glob-to-regexp without options) as a regular expression on the whole import
 * specifier: `*` (or `**`) is any run of characters, "/" included; every other character is
 * literal, `?` too, so `**\/*.wasm?module` matches `./add.wasm?module`.
 */
export function globPattern(glob: string): string {
  return `^${glob.split(/\*+/).map(escapeRegExp).join(".*")}$`;
}

const wasmModuleSuffix = "?module";
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The rule that decides an import specifier's module type, if any, and whether it is used. */
export function ruleFor(
  arranged: ArrangedRules,
  specifier: string,
): { used: true; rule: ModuleRule } | { used: false; rule: ModuleRule; origin: RuleOrigin; by: number } | undefined {
  const matches = (rule: ModuleRule) => rule.globs.some((glob) => new RegExp(globPattern(glob)).test(specifier));
  const used = arranged.used.find(({ rule }) => matches(rule));
  if (used !== undefined) return { used: true, rule: used.rule };
  const unused = arranged.unused.find(({ rule }) => matches(rule));
  return unused === undefined ? undefined : { used: false, ...unused };
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
 * Resolves each import that a used rule matches to an external `./<name>` and records the file in
 * `collected` (by name), for the caller to hand to workerd next to the bundle. The bundle is one
 * module at the root of modulesRoot, so `./<name>` resolves to `<name>` there.
 */
export function moduleRulesPlugin(root: string, collected: Map<string, AdditionalModule>, configRules: readonly ModuleRule[]): Plugin {
  const arranged = arrangeModuleRules(configRules);
  const globs = [...arranged.used, ...arranged.unused].flatMap(({ rule }) => rule.globs);
  // Marks the plugin's own build.resolve() call so that it is not handled again.
  const resolving = Symbol("celld-module-rules");
  return {
    name: "celld-module-rules",
    setup(b) {
      if (globs.length === 0) return;
      b.onResolve({ filter: new RegExp(globs.map(globPattern).join("|")) }, async (args) => {
        // require() of an external module would fail only at run time inside workerd; leave it to
        // esbuild, which inlines a .txt and refuses the others at bundle time, as before.
        if (args.pluginData === resolving || (args.kind !== "import-statement" && args.kind !== "dynamic-import")) {
          return undefined;
        }
        const found = ruleFor(arranged, args.path);
        if (found === undefined) return undefined;
        if (!found.used) return { errors: [{ text: unusedRuleError(args.path, found) }] };
        const type = found.rule.type;
        assert(type !== "ESModule" && type !== "CommonJS", `a ${type} rule was left among the used ones`);
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

/** Names the rule, in the words of the config, and the rule that leaves it unused. */
export function describeRule(rule: ModuleRule, origin: RuleOrigin): string {
  const globs = rule.globs.map((g) => JSON.stringify(g)).join(", ");
  return origin === "default" ? `wrangler's default ${rule.type} rule (${globs})` : `rules[${origin}] (${rule.type}: ${globs})`;
}

function unusedRuleError(specifier: string, found: { rule: ModuleRule; origin: RuleOrigin; by: number }): string {
  return (
    `"${specifier}" matches ${describeRule(found.rule, found.origin)}, which is not used: rules[${found.by}] is the last ` +
    `${found.rule.type} rule, since it does not set fallthrough = true`
  );
}
