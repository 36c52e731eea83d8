/**
 * watchSources on real files: what `celld dev --watch` restarts for. Each test waits for the
 * callback itself (a promise), never for a fixed time, except to show that nothing came.
 */
import { chmodSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { watchSources, type SourceWatch } from "../src/cli/source-watch.ts";

const open: SourceWatch[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const w of open.splice(0)) w.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function directory(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-watch-"));
  dirs.push(dir);
  return dir;
}

/** Starts a watch whose calls are queued; `next()` waits for the next one. */
function watching(paths: string[], settleMs = 30) {
  const calls: string[][] = [];
  let wake: (() => void) | undefined;
  const w = watchSources(paths, (changed) => {
    calls.push([...changed].sort());
    wake?.();
  }, { settleMs });
  open.push(w);
  return {
    calls,
    async next(): Promise<string[]> {
      while (calls.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      return calls.shift()!;
    },
  };
}

test("a file written, or replaced by a rename as editors save, is reported once its writes settle", async () => {
  const dir = directory();
  const main = join(dir, "worker.js");
  const lib = join(dir, "lib.js");
  writeFileSync(main, "v1");
  writeFileSync(lib, "v1");
  const w = watching([main, lib]);
  writeFileSync(main, "v2");
  writeFileSync(main, "v22");
  writeFileSync(lib, "v2");
  expect(await w.next()).toEqual([lib, main]);
  writeFileSync(join(dir, ".worker.js.swp"), "v3");
  renameSync(join(dir, ".worker.js.swp"), main);
  expect(await w.next()).toEqual([main]);
  rmSync(lib);
  expect(await w.next()).toEqual([lib]);
  writeFileSync(lib, "back");
  expect(await w.next()).toEqual([lib]);
});

test("a file that did not exist is reported when it appears; other files of the directory, and a change of mode alone, are not", async () => {
  const dir = directory();
  const vars = join(dir, ".dev.vars");
  const main = join(dir, "worker.js");
  writeFileSync(main, "v1");
  const w = watching([vars, main]);
  writeFileSync(join(dir, "notes.txt"), "not watched");
  chmodSync(main, 0o600);
  writeFileSync(vars, "TOKEN=1");
  expect(await w.next()).toEqual([vars]);
  // Nothing else was reported: the unwatched file and the mode came before the one call.
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(w.calls).toEqual([]);
});

test("after close, nothing is reported", async () => {
  const dir = directory();
  const main = join(dir, "worker.js");
  writeFileSync(main, "v1");
  const w = watching([main]);
  open[0]!.close();
  writeFileSync(main, "v2");
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(w.calls).toEqual([]);
});

test("update() watches the new set: a file added is reported, a file dropped is not, a change made before the update to a file kept still is", async () => {
  const dir = directory();
  const other = directory();
  const main = join(dir, "worker.js");
  const old = join(dir, "old.js");
  const added = join(other, "added.js");
  for (const path of [main, old, added]) writeFileSync(path, "v1");
  const w = watching([main, old], 1_000);
  writeFileSync(main, "v2");
  open[0]!.update([main, added]);
  writeFileSync(old, "v2");
  writeFileSync(added, "v2");
  expect(await w.next()).toEqual([added, main].sort());
});

test("a tree is reported when a file in it, however deep, is added, written or removed; update() can drop it", async () => {
  const tree = directory();
  const calls: string[][] = [];
  let wake: (() => void) | undefined;
  const w = watchSources([], (changed) => {
    calls.push(changed);
    wake?.();
  }, { settleMs: 30, trees: [tree] });
  open.push(w);
  const next = async (): Promise<string[]> => {
    while (calls.length === 0) await new Promise<void>((resolve) => (wake = resolve));
    return calls.shift()!;
  };
  mkdirSync(join(tree, "css"));
  writeFileSync(join(tree, "css", "site.css"), "body {}");
  expect(await next()).toEqual([tree]);
  rmSync(join(tree, "css", "site.css"));
  expect(await next()).toEqual([tree]);
  w.update([], []);
  writeFileSync(join(tree, "later.txt"), "not watched now");
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(calls).toEqual([]);
});
