import { SourceMap } from "node:module";
import { basename } from "node:path";
import { pathToFileURL } from "node:url";
import type { WorkerBundle } from "../bundle/bundle.ts";

/**
 * workerd runs each Worker's bundle under the name of its main file, so the stack positions it
 * prints (`at work (file:///app/src/index.ts:57:34)`) are lines of esbuild's output put on the
 * author's file. This maps them through the bundle's source map to the file and line the author
 * wrote (`file:///app/src/work.ts:3:11`), as wrangler dev does. A `file://` position stays a
 * `file://` URL and a plain path stays a plain path, so editors and terminals link them as before.
 * In what it reports while it loads a Worker, workerd names the main module relative to its
 * modules root, main's directory (worker-options.ts): `service core:user:web: Uncaught
 * SyntaxError: ...` and then `  at index.ts:5:16`. Such a position becomes the source's full path.
 */

export interface BundledWorker {
  /** The Worker's name: the one workerd's reports at load start with, as Miniflare's service "core:user:<name>". */
  name: string;
  main: string;
  bundle: Pick<WorkerBundle, "sourceMap" | "entryFile" | "entryLines">;
}

interface Script {
  bundle: BundledWorker["bundle"];
  map: SourceMap;
}

// An indented V8 frame: `    at name (where)`, `    at where`, `    at async name (where)`.
const frameLine = /^\s+at\s/;
// workerd's first line of what it reports about a Worker it loads.
const serviceLine = /^service core:user:([^\s:]+): /;

export class StackPositions {
  /** By the text a stack names a script with: its file URL, or its plain path. */
  readonly #scripts = new Map<string, Script & { url: boolean }>();
  /** By main's name relative to its directory, then by Worker. */
  readonly #relative = new Map<string, Map<string, Script>>();
  readonly #position: RegExp | undefined;
  /** The Worker the lines being read are about, from a report's first line. */
  #service: string | undefined;

  constructor(workers: readonly BundledWorker[]) {
    const byMain = new Map<string, Script | "ambiguous">();
    for (const { name, main, bundle } of workers) {
      const known = byMain.get(main);
      const shared = known !== undefined && known !== "ambiguous" && sameBundle(known.bundle, bundle);
      const script = shared ? known : { bundle, map: new SourceMap(bundle.sourceMap) };
      // Two Workers may share a main file yet be bundled differently (compatibility flags, the
      // shim); a stack then does not say whose it is, and a wrong line is worse than the bundle's.
      byMain.set(main, known === undefined || shared ? script : "ambiguous");
      const module = basename(main);
      this.#relative.set(module, (this.#relative.get(module) ?? new Map<string, Script>()).set(name, script));
    }
    for (const [main, script] of byMain) {
      if (script === "ambiguous") continue;
      // pathToFileURL percent-encodes; "file://" + path is the same name unencoded.
      for (const url of [pathToFileURL(main).href, `file://${main}`]) this.#scripts.set(url, { ...script, url: true });
      this.#scripts.set(main, { ...script, url: false });
    }
    if (workers.length === 0) return;
    // Longest first, so that a URL wins over the path inside it. A path must not continue one
    // (`/other/app/index.ts` is not `/app/index.ts`, nor is either `index.ts`).
    const names = [...this.#scripts.keys(), ...this.#relative.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
    this.#position = new RegExp(`(?<![\\w/.-])(${names.join("|")}):(\\d+):(\\d+)`, "g");
  }

  /** The line with its bundle positions mapped; undefined for a frame of celld's own entry wrapper. */
  rewrite(line: string): string | undefined {
    if (this.#position === undefined) return line;
    const service = serviceLine.exec(line);
    if (service !== null) this.#service = service[1];
    else if (!frameLine.test(line)) this.#service = undefined;
    let positions = 0;
    let inEntry = false;
    const rewritten = line.replace(this.#position, (whole, name: string, lineText: string, columnText: string) => {
      positions += 1;
      const script = this.#scripts.get(name) ?? this.#relativeScript(name);
      if (script === undefined) return whole;
      if (Number(lineText) <= (script.bundle.entryLines ?? 0)) {
        inEntry = true;
        return whole;
      }
      const origin = originOf(script.map, Number(lineText), Number(columnText));
      if (origin === undefined) return whole;
      if (origin.file === script.bundle.entryFile) {
        inEntry = true;
        return whole;
      }
      const file = script.url ? pathToFileURL(origin.file).href : origin.file;
      return `${file}:${origin.line}:${origin.column}`;
    });
    if (inEntry && positions === 1 && frameLine.test(line)) return undefined;
    return rewritten;
  }

  /**
   * Many Workers' mains are called index.ts: a relative name is the Worker's that the report
   * names, or, outside a report, the one Worker's whose main has that name.
   */
  #relativeScript(name: string): (Script & { url: false }) | undefined {
    const byWorker = this.#relative.get(name);
    if (byWorker === undefined) return undefined;
    const [only, ...others] = byWorker.values();
    const script = this.#service !== undefined ? byWorker.get(this.#service) : others.length === 0 ? only : undefined;
    return script === undefined ? undefined : { ...script, url: false };
  }
}

/**
 * The start of the mapped segment that holds the position, 1-based (what the `source-map`
 * library's originalPositionFor reports). Node's findOrigin would add the offset into the segment
 * and carry a segment over from an earlier line; neither is safe once TypeScript's types are
 * stripped. V8 positions calls and `new` at a segment's start, so they map exactly.
 */
function originOf(map: SourceMap, line: number, column: number): { file: string; line: number; column: number } | undefined {
  const entry = map.findEntry(line - 1, column - 1);
  if (!("originalSource" in entry) || entry.originalSource === undefined || entry.generatedLine !== line - 1) return undefined;
  return { file: entry.originalSource, line: entry.originalLine + 1, column: entry.originalColumn + 1 };
}

function sameBundle(a: BundledWorker["bundle"], b: BundledWorker["bundle"]): boolean {
  return (
    a.entryFile === b.entryFile &&
    a.entryLines === b.entryLines &&
    a.sourceMap.mappings === b.sourceMap.mappings &&
    a.sourceMap.sources.join("\n") === b.sourceMap.sources.join("\n")
  );
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
