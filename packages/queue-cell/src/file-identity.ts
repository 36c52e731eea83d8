import { statSync, type BigIntStats, type Stats } from "node:fs";
import { dirname } from "node:path";

/**
 * How long a directory must have gone unchanged before its timestamps alone are trusted to show
 * a later change: a change within the same tick of the file system's clock can leave them as they
 * were. Two seconds covers the coarsest clocks in use (FAT's; ext4's small inodes and HFS+ keep
 * whole seconds).
 */
const settledDirectoryMs = 2_000;

export interface FileIdentityOptions {
  /** The wall clock, ms; file systems stamp changes by it. A test moves it to settle a directory. */
  now?: () => number;
  /** Looks a path up; statSync unless a test counts the lookups. */
  stat?: typeof statSync;
}

interface DirectoryState {
  dev: bigint;
  ino: bigint;
  ctimeNs: bigint;
  mtimeNs: bigint;
  /** Whether its last change was over settledDirectoryMs before it was read. */
  settled: boolean;
}

/**
 * Whether the files a store opened are still the ones at their paths. A file deleted, moved or
 * replaced while open takes writes all the same, into an inode nothing names any more or that
 * another name now points away from, and the next open reads what is at the path then: nothing,
 * or another file. Compared by path, not by descriptor: a descriptor's link count says a file was
 * deleted or replaced, not that it or its directory was moved.
 *
 * Checked after every flush, so it looks at the files' directories first, not the files: deleting,
 * renaming or replacing a file changes its directory's timestamps, and a directory that is still
 * the one at its path with the timestamps it had leaves its names where they were. Looking at a
 * file itself is what costs: on Linux 6.13 and later, a file whose timestamps were read since its
 * last write gets a fine-grained timestamp at its next, so a stat of the log after each flush made
 * nearly every write change the log's inode, and on ext4 without a journal every `fdatasync` then
 * wrote the inode too (an extra write to the disk for 87% of flushes, against 29% without the
 * stat, in 10 s of 1,000 sends a second).
 */
export class FileIdentity {
  private constructor(
    private readonly files: ReadonlyArray<{ path: string; dev: number; ino: number }>,
    private readonly directoryPaths: readonly string[],
    /** As read before the files were last found where they were; undefined if unreadable then. */
    private directories: readonly DirectoryState[] | undefined,
    private readonly now: () => number,
    private readonly stat: typeof statSync,
  ) {}

  /** The files at `paths` now; a path with no file is left out. */
  static of(paths: readonly string[], options: FileIdentityOptions = {}): FileIdentity {
    const stat = options.stat ?? statSync;
    const now = options.now ?? Date.now;
    // The directories before the files: a change between the two reads shows at the first check.
    const directoryPaths = [...new Set(paths.map((path) => dirname(path)))];
    const directories = readDirectories(directoryPaths, now, stat);
    const files: Array<{ path: string; dev: number; ino: number }> = [];
    for (const path of paths) {
      const stats = stat(path, { throwIfNoEntry: false });
      if (stats !== undefined) files.push({ path, dev: stats.dev, ino: stats.ino });
    }
    return new FileIdentity(files, directoryPaths, directories, now, stat);
  }

  /**
   * What became of the first file no longer at its path, in words (`<path> is gone`), or
   * undefined while every one is. One stat a directory while they are settled and unchanged;
   * otherwise one a file as well.
   */
  changed(): string | undefined {
    const directories = readDirectories(this.directoryPaths, this.now, this.stat);
    if (this.directories !== undefined && directories !== undefined && sameAndSettled(this.directories, directories)) {
      return undefined;
    }
    const what = this.filesChanged();
    // The directories as read before the files: a change since shows at the next check.
    if (what === undefined) this.directories = directories;
    return what;
  }

  private filesChanged(): string | undefined {
    for (const { path, dev, ino } of this.files) {
      let stats: Stats | undefined;
      try {
        stats = this.stat(path, { throwIfNoEntry: false });
      } catch (error) {
        // A directory of the path became a file. Any other failure to look (a directory made
        // unreadable) says nothing of where the file is, and stops no writes.
        if ((error as { code?: unknown }).code === "ENOTDIR") return `${path} is gone`;
        continue;
      }
      if (stats === undefined) return `${path} is gone`;
      if (stats.ino !== ino || stats.dev !== dev) return `${path} is another file now`;
    }
    return undefined;
  }
}

/**
 * The directories at `paths` now; undefined if one cannot be read (gone, or unreadable), or on
 * Windows, which stamps a directory's changes lazily: every check there looks at the files.
 */
function readDirectories(paths: readonly string[], now: () => number, stat: typeof statSync): DirectoryState[] | undefined {
  if (process.platform === "win32") return undefined;
  const readAt = now();
  const states: DirectoryState[] = [];
  for (const path of paths) {
    let stats: BigIntStats | undefined;
    try {
      stats = stat(path, { bigint: true, throwIfNoEntry: false });
    } catch {
      return undefined;
    }
    if (stats === undefined) return undefined;
    const lastChangeMs = Number((stats.ctimeNs > stats.mtimeNs ? stats.ctimeNs : stats.mtimeNs) / 1_000_000n);
    states.push({
      dev: stats.dev,
      ino: stats.ino,
      ctimeNs: stats.ctimeNs,
      mtimeNs: stats.mtimeNs,
      settled: lastChangeMs <= readAt - settledDirectoryMs,
    });
  }
  return states;
}

function sameAndSettled(before: readonly DirectoryState[], after: readonly DirectoryState[]): boolean {
  return before.every((b, i) => {
    const a = after[i]!;
    return b.settled && a.dev === b.dev && a.ino === b.ino && a.ctimeNs === b.ctimeNs && a.mtimeNs === b.mtimeNs;
  });
}
