import { builtinModules, type SourceMapPayload } from "node:module";
import { basename, dirname, resolve } from "node:path";
import { build, type BuildFailure, type Message, type OutputFile, type Plugin } from "esbuild";
import type { WorkerConfig } from "../config/index.ts";
import { resolveNodejsCompat } from "../config/nodejs-compat.ts";
import { moduleRulesPlugin, type AdditionalModule } from "../config/module-rules.ts";

/**
 * Bundles a Worker's `main` into one ES module the way wrangler does, so code that deploys to
 * Cloudflare bundles the same here: workerd/worker/browser export conditions, browser-first main
 * fields, ES2022. Node built-ins stay imports for workerd to provide, and only when the Worker
 * turned on Node compatibility; otherwise workerd would fail later with a less useful message.
 * Imports of text, data and WebAssembly files become workerd modules of their own (module-rules.ts).
 */

export interface BundleMessage {
  /** Absolute path of the file at fault. */
  file: string;
  /** 1-based, as editors count; absent when esbuild names no position. */
  line?: number;
  column?: number;
  text: string;
}

export class BundleError extends Error {
  readonly code = "ERR_BUNDLE" as const;
  readonly messages: readonly BundleMessage[];

  constructor(worker: string, messages: readonly BundleMessage[]) {
    super([`could not bundle Worker "${worker}":`, ...messages.map(formatBundleMessage)].join("\n"));
    this.name = "BundleError [ERR_BUNDLE]";
    this.messages = messages;
  }
}

export function isBundleError(error: unknown): error is BundleError {
  return error instanceof BundleError;
}

export function formatBundleMessage(m: BundleMessage): string {
  return m.line === undefined ? `${m.file}: ${m.text}` : `${m.file}:${m.line}:${m.column ?? 1}: ${m.text}`;
}

export interface BundleOptions {
  /**
   * Source of an entry module to bundle instead of `main` itself (it imports `main`); resolved
   * from main's directory. The host uses it to wrap the Worker's handlers.
   */
  entrySource?: string;
}

export interface WorkerBundle {
  code: string;
  /**
   * esbuild's source map of `code`, with every source an absolute path. It stays on the host,
   * which maps the stack positions workerd prints (workerd names `code` by the Worker's main).
   */
  sourceMap: SourceMapPayload;
  /**
   * Where the map places the `entrySource` module, which is no file of the Worker's; absent
   * without one.
   */
  entryFile?: string;
  /**
   * Lines at the top of `code` that are celld's own, not the Worker's (a service-worker script's
   * shim, service-worker-shim.ts), which the map leaves without a position; absent without them.
   */
  entryLines?: number;
  /** False for a service-worker script (addEventListener), which Miniflare loads as a plain script. */
  modules: boolean;
  exports: string[];
  /** The files `code` imports as Text, Data or CompiledWasm modules; always empty when `modules` is false. */
  additionalModules: AdditionalModule[];
  /** Absolute paths of the files the bundle was built from, the additional modules' included. */
  inputs: string[];
}

export async function bundleWorker(worker: WorkerConfig, options: BundleOptions = {}): Promise<WorkerBundle> {
  const bundle = await bundleOnce(worker, options, true);
  if (bundle.modules || bundle.additionalModules.length === 0) return bundle;
  // A service-worker script has no modules to import: bundle it as before the module rules, with
  // a .txt inlined by esbuild and the other file types refused by it.
  return bundleOnce(worker, options, false);
}

const entrySourceName = "celld-entry.js";

async function bundleOnce(worker: WorkerConfig, options: BundleOptions, moduleRules: boolean): Promise<WorkerBundle> {
  const workingDir = dirname(worker.configPath);
  const collected = new Map<string, AdditionalModule>();
  try {
    const result = await build({
      ...(options.entrySource === undefined
        ? { entryPoints: [worker.main] }
        : { stdin: { contents: options.entrySource, resolveDir: dirname(worker.main), sourcefile: entrySourceName } }),
      absWorkingDir: workingDir,
      bundle: true,
      write: false,
      // Nothing is written: the output is named as workerd names the bundle, and the map's sources
      // are relative to main's directory. The code carries no sourceMappingURL; workerd needs none.
      outfile: worker.main,
      sourcemap: "external",
      sourcesContent: false,
      metafile: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      conditions: ["workerd", "worker", "browser"],
      mainFields: ["browser", "module", "main"],
      // wrangler's default (keep_names): workerd error messages and class names stay readable.
      keepNames: true,
      define: worker.define,
      logLevel: "silent",
      plugins: [
        // First, as in wrangler: an alias replaces a Node built-in or a module-rules file too.
        aliases(worker.alias, workingDir),
        nodeBuiltins(worker.compatibilityDate, worker.compatibilityFlags),
        // Names are relative to main's directory, Miniflare's modulesRoot (host/worker-options.ts),
        // for the plain bundle and the consumer's shimmed one alike.
        ...(moduleRules ? [moduleRulesPlugin(dirname(worker.main), collected, worker.moduleRules)] : []),
      ],
    });
    const output = result.outputFiles.find((f) => !f.path.endsWith(".map"));
    const map = result.outputFiles.find((f) => f.path.endsWith(".map"));
    const meta = Object.entries(result.metafile.outputs).find(([path]) => !path.endsWith(".map"))?.[1];
    if (output === undefined || map === undefined || meta === undefined) {
      throw new Error("esbuild returned no code, map or metafile entry for one entry point");
    }
    // A script with neither exports nor imports is a service-worker script (addEventListener);
    // Miniflare must load it as a plain script, not as a module. An import of a collected file
    // does not count: such a script is bundled again without the module rules.
    const ownModules = new Set([...collected.keys()].map((name) => `./${name}`));
    const modules = meta.exports.length > 0 || meta.imports.some((i) => i.external && !ownModules.has(i.path));
    const entryFile = options.entrySource === undefined ? undefined : resolve(dirname(worker.main), entrySourceName);
    return {
      code: output.text,
      sourceMap: absoluteSourceMap(map, entryFile),
      ...(entryFile === undefined ? {} : { entryFile }),
      modules,
      exports: meta.exports,
      additionalModules: [...collected.values()],
      inputs: bundleInputs(Object.keys(result.metafile.inputs), workingDir, collected.values(), options.entrySource !== undefined),
    };
  } catch (error) {
    if (!isBuildFailure(error)) throw error;
    throw new BundleError(worker.name, error.errors.map((m) => toBundleMessage(m, workingDir, worker)));
  }
}

/**
 * The metafile's inputs as files: relative to the working directory, except what is no file (an
 * entry source, named entrySourceName; a plugin's namespaced or data: modules), which is left out.
 */
function bundleInputs(names: readonly string[], workingDir: string, collected: Iterable<AdditionalModule>, entrySource: boolean): string[] {
  const files = new Set<string>();
  for (const name of names) {
    if ((entrySource && basename(name) === entrySourceName) || name.startsWith("<") || /^[a-z][\w-]+:/i.test(name)) continue;
    files.add(resolve(workingDir, name));
  }
  for (const module of collected) files.add(module.file);
  return [...files];
}

/**
 * esbuild names sources relative to the map's own location, which is known only here. A module
 * the entry source imports as a data: URL (esbuild's `dataurl:` source) is the entry's own (the
 * handler shim's writer and reports), and goes by its name, so that its frames are dropped as the
 * entry's are.
 */
function absoluteSourceMap(map: OutputFile, entryFile: string | undefined): SourceMapPayload {
  const raw = JSON.parse(map.text) as { version: number; sources: string[]; names: string[]; mappings: string };
  const dir = dirname(map.path);
  return {
    version: raw.version,
    file: map.path.slice(0, -".map".length),
    sources: raw.sources.map((source) => (entryFile !== undefined && source.startsWith("dataurl:") ? entryFile : resolve(dir, source))),
    sourcesContent: [],
    sourceRoot: "",
    names: raw.names,
    mappings: raw.mappings,
  };
}

/**
 * The config's `alias`: an import of exactly a key is resolved as an import of its value from the
 * config file's directory, as wrangler does (esbuild's own `alias` would come after the other
 * plugins, and would also take `key/sub/path`).
 */
function aliases(alias: Readonly<Record<string, string>>, configDir: string): Plugin {
  // Marks the plugin's own build.resolve() call, so that an alias of an alias is not followed.
  const resolving = Symbol("celld-alias");
  return {
    name: "celld-alias",
    setup(b) {
      const keys = Object.keys(alias);
      if (keys.length === 0) return;
      b.onResolve({ filter: new RegExp(`^(?:${keys.map(escapeRegExp).join("|")})$`) }, async (args) => {
        if (args.pluginData === resolving || !Object.hasOwn(alias, args.path)) return undefined;
        const target = alias[args.path]!;
        const resolved = await b.resolve(target, { kind: args.kind, resolveDir: configDir, importer: args.importer, pluginData: resolving });
        if (resolved.errors.length > 0) {
          return { errors: resolved.errors.map((e) => ({ ...e, text: `alias "${args.path}" = "${target}": ${e.text}` })) };
        }
        return resolved;
      });
    },
  };
}

const builtinNames = new Set(builtinModules.filter((name) => !name.startsWith("_")));
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const bareBuiltin = new RegExp(`^(?:${[...builtinNames].map(escapeRegExp).join("|")})$`);

function nodeBuiltins(compatibilityDate: string, flags: readonly string[]): Plugin {
  const resolved = resolveNodejsCompat(compatibilityDate, flags);
  const compat = resolved.nodejsCompat || resolved.nodejsCompatV2;
  // workerd's nodejs_als flag provides AsyncLocalStorage alone, without the rest of Node.
  const provided = (name: string) => compat || (flags.includes("nodejs_als") && name === "async_hooks");
  return {
    name: "celld-node-builtins",
    setup(b) {
      // workerd provides these (cloudflare:workers for DurableObject and WorkerEntrypoint,
      // cloudflare:sockets, ...), as wrangler leaves them for it.
      b.onResolve({ filter: /^cloudflare:/ }, (args) => ({ path: args.path, external: true }));
      b.onResolve({ filter: /^node:/ }, (args) => {
        const name = args.path.slice("node:".length);
        if (provided(name)) return { path: args.path, external: true };
        return { errors: [{ text: needsCompat(args.path, flags) }] };
      });
      // A bare `buffer` may be an npm polyfill in node_modules: without compatibility, let esbuild
      // look for one (a failure is reworded in toBundleMessage).
      b.onResolve({ filter: bareBuiltin }, (args) =>
        provided(args.path) ? { path: `node:${args.path}`, external: true } : undefined,
      );
    },
  };
}

function needsCompat(specifier: string, flags: readonly string[]): string {
  // On a date that turns compatibility on by itself, only the opt-out flag can have turned it off.
  const change = flags.includes("no_nodejs_compat") ? 'remove "no_nodejs_compat" from' : 'add "nodejs_compat" to';
  return `"${specifier}" is a Node.js built-in module; ${change} compatibility_flags to use it`;
}

function toBundleMessage(m: Message, workingDir: string, worker: WorkerConfig): BundleMessage {
  const unresolved = /^Could not resolve "([^"]+)"$/.exec(m.text)?.[1];
  const text = unresolved !== undefined && builtinNames.has(unresolved) ? needsCompat(unresolved, worker.compatibilityFlags) : m.text;
  if (m.location === null) return { file: worker.main, text };
  return {
    file: resolve(workingDir, m.location.file),
    line: m.location.line,
    // esbuild counts columns from 0.
    column: m.location.column + 1,
    text,
  };
}

function isBuildFailure(error: unknown): error is BuildFailure {
  return error instanceof Error && Array.isArray((error as Partial<BuildFailure>).errors);
}
