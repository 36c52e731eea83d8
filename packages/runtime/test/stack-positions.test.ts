import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { bundleWorker, type WorkerBundle } from "../src/bundle/bundle.ts";
import { parseDeployment, type WorkerConfig } from "../src/config/index.ts";
import { handlerErrorShim } from "../src/worker-code/handler-error-shim.ts";
import { StackPositions } from "../src/workerd/stack-positions.ts";

// A two-file TypeScript Worker: the error is thrown in work.ts, line 3, at `new` (column 11);
// index.ts calls work() on line 5, column 25.
const files = {
  "src/index.ts": `import { work } from "./work.ts";

export default {
  async fetch(request: Request): Promise<Response> {
    return new Response(work(new URL(request.url).pathname));
  },
};
`,
  "src/work.ts": `export function work(path: string): string {
  if (path === "/throw") {
    throw new Error("work failed");
  }
  return "ok";
}
`,
};

let dir = "";
let worker: WorkerConfig;
let plain: WorkerBundle;
let shimmed: WorkerBundle;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "celld-stack-"));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const config = { name: "web", main: "src/index.ts", compatibility_date: "2025-09-01" };
  const [parsed] = parseDeployment([{ path: join(dir, "wrangler.json"), text: JSON.stringify(config) }]).workers;
  if (parsed === undefined) throw new Error("the config yields no Worker");
  worker = parsed;
  plain = await bundleWorker(worker);
  shimmed = await bundleWorker(worker, { entrySource: handlerErrorShim(worker.main) });
});
afterAll(() => {
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs the bundle's fetch() for /throw in a Node process of its own (V8, as in workerd, with no
 * test runner rewriting the code or its stacks) and returns what it printed: the caught error's
 * stack on stdout, the shim's report on stderr. The bundle file stands in for workerd's main.
 */
function runThrowing(bundle: WorkerBundle, name: string): { file: string; stdout: string[]; stderr: string[] } {
  const file = join(dir, "out", `${name}.mjs`);
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, bundle.code);
  // The shim listens for unhandled rejections on workerd's global scope, which Node's lacks.
  const script = `globalThis.addEventListener ??= () => {};
const { default: worker } = await import(process.argv[1]);
try { await worker.fetch(new Request("http://localhost/throw")); } catch (error) { console.log(error.stack); }`;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", script, pathToFileURL(file).href], { encoding: "utf8" });
  return { file, stdout: run.stdout.split("\n"), stderr: run.stderr.split("\n") };
}

const rewriteAll = (positions: StackPositions, lines: string[]) =>
  lines.map((line) => positions.rewrite(line)).filter((line) => line !== undefined);

/** 1-based line and column of the first occurrence of `text` in `code`. */
function positionOf(code: string, text: string): { line: number; column: number } {
  const before = code.slice(0, code.indexOf(text)).split("\n");
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}

describe("StackPositions", () => {
  test("a V8 stack from the bundle names the user's files and lines, as file URLs", () => {
    const { file, stdout } = runThrowing(plain, "plain");
    expect(stdout.join("\n")).toContain(pathToFileURL(file).href);
    const positions = new StackPositions([{ name: "web", main: file, bundle: plain }]);
    const stack = rewriteAll(positions, stdout).join("\n");
    expect(stack).toContain(`Error: work failed\n    at work (${pathToFileURL(join(dir, "src/work.ts")).href}:3:11)`);
    expect(stack).toContain(`at Object.fetch (${pathToFileURL(join(dir, "src/index.ts")).href}:5:25)`);
    expect(stack).not.toContain(file);
  });

  test("the shim's own frames are dropped; the user's stay, mapped", () => {
    const { file, stderr } = runThrowing(shimmed, "shimmed");
    const positions = new StackPositions([{ name: "web", main: file, bundle: shimmed }]);
    const report = rewriteAll(positions, stderr);
    expect(report[0]).toBe("[celld] fetch() handler for GET /throw threw: Error: work failed");
    expect(report[1]).toBe(`    at work (${pathToFileURL(join(dir, "src/work.ts")).href}:3:11)`);
    expect(report[2]).toBe(`    at Object.fetch (${pathToFileURL(join(dir, "src/index.ts")).href}:5:25)`);
    // The raw report had a frame of the shim's (its wrapper of fetch); nothing of it remains.
    expect(stderr.filter((line) => line.includes(file)).length).toBeGreaterThan(2);
    expect(report.join("\n")).not.toContain(file);
    expect(report.join("\n")).not.toContain("celld-entry");
  });

  test("a plain path stays a plain path; other text, other files and unmapped positions stay as they are", () => {
    const main = join(dir, "out", "plain.mjs");
    const positions = new StackPositions([{ name: "web", main, bundle: plain }]);
    const { line, column } = positionOf(plain.code, 'new Error("work failed")');
    expect(positions.rewrite(`    at work (${main}:${line}:${column})`)).toBe(`    at work (${join(dir, "src/work.ts")}:3:11)`);
    expect(positions.rewrite(`at ${main}:${line}:${column} and ${pathToFileURL(main).href}:${line}:${column}`)).toBe(
      `at ${join(dir, "src/work.ts")}:3:11 and ${pathToFileURL(join(dir, "src/work.ts")).href}:3:11`,
    );
    for (const unchanged of [
      "handler says: hello",
      `    at work (${main}:9999:1)`,
      `    at work (/elsewhere${main}:${line}:${column})`,
      `    at work (${join(dir, "out", "other.mjs")}:${line}:${column})`,
    ]) {
      expect(positions.rewrite(unchanged)).toBe(unchanged);
    }
  });

  test("a frame in the shim that is not a whole stack line is kept, unmapped", () => {
    const main = join(dir, "out", "shimmed.mjs");
    const positions = new StackPositions([{ name: "web", main, bundle: shimmed }]);
    const { line, column } = positionOf(shimmed.code, "run(this, args)");
    expect(positions.rewrite(`    at Object.fetch (${main}:${line}:${column})`)).toBeUndefined();
    const said = `the wrapper is at ${main}:${line}:${column}`;
    expect(positions.rewrite(said)).toBe(said);
  });

  test("a module named relative to main's directory (workerd's reports at load) is mapped to the source's path", () => {
    const main = join(dir, "out", "plain.mjs");
    const other = join(dir, "elsewhere", "plain.mjs");
    const frameAt = (code: string, text: string) => {
      const { line, column } = positionOf(code, text);
      return `  at plain.mjs:${line}:${column} in work`;
    };
    const thrown = frameAt(plain.code, 'new Error("work failed")');
    const mapped = `  at ${join(dir, "src/work.ts")}:3:11 in work`;
    expect(new StackPositions([{ name: "web", main, bundle: plain }]).rewrite(thrown)).toBe(mapped);
    // Two Workers whose mains have one name: the report's first line says whose the frames are.
    // A frame of the shim's is dropped from a report on the shimmed Worker, and beyond the end of
    // the other's bundle.
    const two = new StackPositions([
      { name: "web", main, bundle: plain },
      { name: "jobs", main: other, bundle: shimmed },
    ]);
    const inShim = frameAt(shimmed.code, "run(this, args)");
    // The shim's own modules come first in its bundle: the same code, further down.
    const thrownInShimmed = frameAt(shimmed.code, 'new Error("work failed")');
    expect(two.rewrite(thrown)).toBe(thrown);
    expect(two.rewrite("service core:user:web: Uncaught Error: work failed")).toBe("service core:user:web: Uncaught Error: work failed");
    expect(two.rewrite(thrown)).toBe(mapped);
    expect(two.rewrite(inShim)).toBe(inShim);
    two.rewrite("service core:user:jobs: Uncaught Error: work failed");
    expect(two.rewrite(thrownInShimmed)).toBe(mapped);
    expect(two.rewrite(inShim)).toBeUndefined();
    // A line of other output ends the report.
    expect(two.rewrite("hello")).toBe("hello");
    expect(two.rewrite(thrown)).toBe(thrown);
    // A name inside a longer path is not the module's.
    const longer = thrown.replace("plain.mjs", "/srv/plain.mjs");
    expect(new StackPositions([{ name: "web", main, bundle: plain }]).rewrite(longer)).toBe(longer);
  });

  test("two Workers bundled differently from one main file: a stack cannot say whose it is, so it is left alone", () => {
    const main = join(dir, "out", "plain.mjs");
    const { line, column } = positionOf(plain.code, 'new Error("work failed")');
    const frame = `    at work (${main}:${line}:${column})`;
    expect(new StackPositions([{ name: "web", main, bundle: plain }, { name: "web", main, bundle: plain }]).rewrite(frame)).toContain("work.ts:3:11");
    expect(new StackPositions([{ name: "web", main, bundle: plain }, { name: "web", main, bundle: shimmed }]).rewrite(frame)).toBe(frame);
  });
});
