import { SourceMap } from "node:module";
import { pathToFileURL } from "node:url";
import type { WorkerBundle } from "../bundle.ts";

/**
 * workerd runs each Worker's bundle under the name of its main file, so the stack positions it
 * prints (`at work (file:///app/src/index.ts:57:34)`) are lines of esbuild's output put on the
 * author's file. This maps them through the bundle's source map to the file and line the author
 * wrote (`file:///app/src/work.ts:3:11`), as wrangler dev does. A `file://` position stays a
 * `file://` URL and a plain path stays a plain path, so editors and terminals link them as before.
 */

export interface BundledWorker {
  main: string;
  bundle: Pick<WorkerBundle, "sourceMap" | "entryFile">;
}

interface Script {
  bundle: BundledWorker["bundle"];
  map: SourceMap;
}

// An indented V8 frame: `    at name (where)`, `    at where`, `    at async name (where)`.
const frameLine = /^\s+at\s/;

export class StackPositions {
  /** By the text a stack names a script with: its file URL, or its plain path. */
  readonly #scripts = new Map<string, Script & { url: boolean }>();
  readonly #position: RegExp | undefined;

  constructor(workers: readonly BundledWorker[]) {
    const byMain = new Map<string, Script | "ambiguous">();
    for (const { main, bundle } of workers) {
      const known = byMain.get(main);
      // Two Workers may share a main file yet be bundled differently (compatibility flags, the
      // shim); a stack then does not say whose it is, and a wrong line is worse than the bundle's.
      if (known === "ambiguous" || (known !== undefined && !sameBundle(known.bundle, bundle))) {
        byMain.set(main, "ambiguous");
      } else if (known === undefined) {
        byMain.set(main, { bundle, map: new SourceMap(bundle.sourceMap) });
      }
    }
    for (const [main, script] of byMain) {
      if (script === "ambiguous") continue;
      // pathToFileURL percent-encodes; "file://" + path is the same name unencoded.
      for (const url of [pathToFileURL(main).href, `file://${main}`]) this.#scripts.set(url, { ...script, url: true });
      this.#scripts.set(main, { ...script, url: false });
    }
    if (this.#scripts.size === 0) return;
    // Longest first, so that a URL wins over the path inside it. A path must not continue one
    // (`/other/app/index.ts` is not `/app/index.ts`).
    const names = [...this.#scripts.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
    this.#position = new RegExp(`(?<![\\w/.-])(${names.join("|")}):(\\d+):(\\d+)`, "g");
  }

  /** The line with its bundle positions mapped; undefined for a frame of celld's own entry wrapper. */
  rewrite(line: string): string | undefined {
    if (this.#position === undefined) return line;
    let positions = 0;
    let inEntry = false;
    const rewritten = line.replace(this.#position, (whole, name: string, lineText: string, columnText: string) => {
      positions += 1;
      const script = this.#scripts.get(name);
      if (script === undefined) return whole;
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
    a.sourceMap.mappings === b.sourceMap.mappings &&
    a.sourceMap.sources.join("\n") === b.sourceMap.sources.join("\n")
  );
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
