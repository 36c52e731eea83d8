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
  const watch = new SourceWatcher(changed, options.settleMs ?? sourceWatchSettleMsDefault);
  watch.update(paths, options.trees);
  return watch;
}

/** The state of one watch: what each file was when last looked at, and the watchers held. */
class SourceWatcher implements SourceWatch {
  private seen = new Map<string, Seen | undefined>();
  private readonly directories = new Map<string, { names: Set<string>; watcher: FSWatcher | undefined }>();
  /** Directories watched whole (a Worker's assets): any file added, removed or written in them. */
  private readonly trees = new Map<string, FSWatcher | undefined>();
  private readonly treesTouched = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly changed: (paths: string[]) => void,
    private readonly settleMs: number,
  ) {}

  update(next: readonly string[], nextTrees: readonly string[] = []): void {
    if (this.closed) return;
    this.updateTrees(nextTrees);
    const nextSeen = new Map<string, Seen | undefined>();
    for (const path of next.map((p) => resolve(p))) nextSeen.set(path, this.seen.has(path) ? this.seen.get(path) : look(path));
    this.seen = nextSeen;
    this.updateDirectories();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    for (const { watcher } of this.directories.values()) watcher?.close();
    for (const watcher of this.trees.values()) watcher?.close();
    this.directories.clear();
    this.trees.clear();
  }

  private updateTrees(nextTrees: readonly string[]): void {
    const wantedTrees = new Set(nextTrees.map((tree) => resolve(tree)));
    for (const [tree, watcher] of this.trees) {
      if (!wantedTrees.has(tree)) {
        watcher?.close();
        this.trees.delete(tree);
      }
    }
    for (const tree of wantedTrees) {
      if (this.trees.has(tree)) continue;
      this.trees.set(
        tree,
        watchOrNot(tree, true, () => {
          this.treesTouched.add(tree);
          this.touched();
        }),
      );
    }
  }

  /** One watcher for each directory holding a watched file. */
  private updateDirectories(): void {
    const wanted = new Map<string, Set<string>>();
    for (const path of this.seen.keys()) {
      const names = wanted.get(dirname(path)) ?? new Set<string>();
      names.add(basename(path));
      wanted.set(dirname(path), names);
    }
    for (const [directory, entry] of this.directories) {
      if (!wanted.has(directory)) {
        entry.watcher?.close();
        this.directories.delete(directory);
      }
    }
    for (const [directory, names] of wanted) {
      const entry = this.directories.get(directory);
      if (entry === undefined) {
        const watcher = watchOrNot(directory, false, (name) => {
          // Some platforms give no name; then any file of the directory may have changed.
          if (name === null || names.has(name)) this.touched();
        });
        this.directories.set(directory, { names, watcher });
      } else {
        // The watcher's callback reads this set: new names are seen without a new watcher.
        entry.names.clear();
        for (const name of names) entry.names.add(name);
      }
    }
  }

  private touched(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.settle(), this.settleMs);
  }

  private settle(): void {
    this.timer = undefined;
    if (this.closed) return;
    const now: string[] = [];
    for (const [path, before] of this.seen) {
      const after = look(path);
      if (!same(before, after)) {
        this.seen.set(path, after);
        now.push(path);
      }
    }
    for (const tree of this.treesTouched) if (this.trees.has(tree)) now.push(tree);
    this.treesTouched.clear();
    if (now.length > 0) this.changed(now);
  }
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
