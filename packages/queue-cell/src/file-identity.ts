import { statSync, type Stats } from "node:fs";

/**
 * Whether the files a store opened are still the ones at their paths. A file deleted, moved or
 * replaced while open takes writes all the same, into an inode nothing names any more or that
 * another name now points away from, and the next open reads what is at the path then: nothing,
 * or another file. Compared by path, not by descriptor: a descriptor's link count says a file was
 * deleted or replaced, not that it or its directory was moved.
 */
export class FileIdentity {
  private constructor(private readonly files: ReadonlyArray<{ path: string; dev: number; ino: number }>) {}

  /** The files at `paths` now; a path with no file is left out. */
  static of(paths: readonly string[]): FileIdentity {
    const files: Array<{ path: string; dev: number; ino: number }> = [];
    for (const path of paths) {
      const stats = statSync(path, { throwIfNoEntry: false });
      if (stats !== undefined) files.push({ path, dev: stats.dev, ino: stats.ino });
    }
    return new FileIdentity(files);
  }

  /**
   * What became of the first file no longer at its path, in words (`<path> is gone`), or
   * undefined while every one is. One stat per file: a few microseconds, run once per flush.
   */
  changed(): string | undefined {
    for (const { path, dev, ino } of this.files) {
      let stats: Stats | undefined;
      try {
        stats = statSync(path, { throwIfNoEntry: false });
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
