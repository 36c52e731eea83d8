import { statSync, watch, type FSWatcher } from "node:fs";
import { basename, dirname, resolve } from "node:path";

/**
 * How long after a change to wait for more before acting on them: an editor's save, a `git
 * checkout` or a formatter writes several files, or one file several times, within a few ms.
 */
export const sourceWatchSettleMsDefault = 150;

export interface SourceWatch {
  /**
   * Watches `paths` from now on instead of the paths it watched: a file it watched already keeps
   * what it was last seen as, so a change made meanwhile is still reported; a new one is seen as
   * it is now. The same for `trees`.
   */
  update(paths: readonly string[], trees?: readonly string[]): void;
  close(): void;
}

/** What identifies a file's content without reading it: changed by every write, rename or delete. */
interface Seen {
  mtimeNs: bigint;
  size: bigint;
  ino: bigint;
}

/**
 * Watches `paths` (files) and calls `changed` with those whose content changed, once no more
 * changes have come for `settleMs`; and `trees`, directories watched whole, which are reported
 * when anything in them was added, removed or written. Each file's directory is watched rather
 * than the file itself: editors commonly save by writing a new file and renaming it over the old
 * one, which ends a watch on the old file. An event that leaves a file as it was (a save with no
 * change, a change of mode) calls nothing. A file that does not exist yet is watched for all the
 * same, and counts as changed once it does.
 */
export function watchSources(
  paths: readonly string[],
  changed: (paths: string[]) => void,
  options: { settleMs?: number; trees?: readonly string[] } = {},
): SourceWatch {
  const settleMs = options.settleMs ?? sourceWatchSettleMsDefault;
  let seen = new Map<string, Seen | undefined>();
  const directories = new Map<string, { names: Set<string>; watcher: FSWatcher | undefined }>();
  // Directories watched whole (a Worker's assets): any file added, removed or written in them.
  const trees = new Map<string, FSWatcher | undefined>();
  const treesTouched = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const settle = (): void => {
    timer = undefined;
    if (closed) return;
    const now: string[] = [];
    for (const [path, before] of seen) {
      const after = look(path);
      if (!same(before, after)) {
        seen.set(path, after);
        now.push(path);
      }
    }
    for (const tree of treesTouched) if (trees.has(tree)) now.push(tree);
    treesTouched.clear();
    if (now.length > 0) changed(now);
  };
  const touched = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(settle, settleMs);
  };
  const watchDirectory = (directory: string, names: Set<string>): FSWatcher | undefined =>
    watchOrNot(directory, false, (name) => {
      // Some platforms give no name; then any file of the directory may have changed.
      if (name === null || names.has(name)) touched();
    });
  const watchTree = (tree: string): FSWatcher | undefined =>
    watchOrNot(tree, true, () => {
      treesTouched.add(tree);
      touched();
    });
  const update = (next: readonly string[], nextTrees: readonly string[] = []): void => {
    if (closed) return;
    const wantedTrees = new Set(nextTrees.map((tree) => resolve(tree)));
    for (const [tree, watcher] of trees) {
      if (!wantedTrees.has(tree)) {
        watcher?.close();
        trees.delete(tree);
      }
    }
    for (const tree of wantedTrees) if (!trees.has(tree)) trees.set(tree, watchTree(tree));
    const nextSeen = new Map<string, Seen | undefined>();
    for (const path of next.map((p) => resolve(p))) nextSeen.set(path, seen.has(path) ? seen.get(path) : look(path));
    seen = nextSeen;
    const wanted = new Map<string, Set<string>>();
    for (const path of seen.keys()) {
      const names = wanted.get(dirname(path)) ?? new Set<string>();
      names.add(basename(path));
      wanted.set(dirname(path), names);
    }
    for (const [directory, entry] of directories) {
      if (!wanted.has(directory)) {
        entry.watcher?.close();
        directories.delete(directory);
      }
    }
    for (const [directory, names] of wanted) {
      const entry = directories.get(directory);
      if (entry === undefined) {
        directories.set(directory, { names, watcher: watchDirectory(directory, names) });
      } else {
        // The watcher's callback reads this set: new names are seen without a new watcher.
        entry.names.clear();
        for (const name of names) entry.names.add(name);
      }
    }
  };
  update(paths, options.trees);
  return {
    update,
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      for (const { watcher } of directories.values()) watcher?.close();
      for (const watcher of trees.values()) watcher?.close();
      directories.clear();
      trees.clear();
    },
  };
}

/**
 * A watch of `directory`, or undefined when it is not there (its files are missing, and the next
 * start says so). Persistent: while no Worker runs (a restart that failed), the watch is what
 * keeps celld up.
 */
function watchOrNot(directory: string, recursive: boolean, event: (name: string | null) => void): FSWatcher | undefined {
  try {
    const watcher = watch(directory, { recursive }, (_type, name) => event(name === null ? null : name.toString()));
    // A watched directory deleted or unmounted: nothing more comes from it.
    watcher.on("error", () => watcher.close());
    return watcher;
  } catch {
    return undefined;
  }
}

function look(path: string): Seen | undefined {
  try {
    const stats = statSync(path, { bigint: true });
    return { mtimeNs: stats.mtimeNs, size: stats.size, ino: stats.ino };
  } catch {
    return undefined;
  }
}

function same(a: Seen | undefined, b: Seen | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.mtimeNs === b.mtimeNs && a.size === b.size && a.ino === b.ino;
}
