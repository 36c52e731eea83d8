import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";

/**
 * The cells' directory of a data directory, `<dataDir>/cells/` (mode 0700): where each queue's
 * file is, and what is on disk, read from the directory alone. A registry (on this thread or on
 * worker threads) opens the files; this only names and lists them.
 */
export class CellDirectory {
  readonly dir: string;

  constructor(
    dataDir: string,
    /** Told of a file left out of storedNames because it could not be read. */
    private readonly onWarning?: (message: string) => void,
  ) {
    this.dir = join(dataDir, "cells");
    // Every queue's messages are in here: no other local user may read them. The directory is the
    // registry's alone, so one an older version left open to others is closed as well.
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
  }

  /**
   * Every cell on disk, open or not. What is not a regular file (a directory, a socket) is passed
   * over; a file that cannot be opened or read (out of descriptors, removed meanwhile, damaged, not
   * a database) is told to onWarning and passed over, rather than failing the whole listing.
   */
  storedNames(): string[] {
    const names: string[] = [];
    for (const file of readdirSync(this.dir)) {
      if (!file.endsWith(".sqlite")) continue;
      const path = join(this.dir, file);
      let db: Database.Database | undefined;
      try {
        // Followed, as SQLite would follow a link to a cell's file.
        if (!statSync(path).isFile()) continue;
        db = new Database(path, { readonly: true, fileMustExist: true });
        const row = db.prepare("SELECT value FROM meta WHERE key = 'name'").get() as { value: string } | undefined;
        if (row !== undefined) names.push(row.value);
      } catch (error) {
        // A SQLite file of another program, without the table, is not a cell; anything else may be one.
        if (!(error instanceof Database.SqliteError && /^no such table: meta$/.test(error.message))) {
          this.onWarning?.(`${path} is left out of the stored queues: it could not be read: ${(error as Error).message}`);
        }
      } finally {
        db?.close();
      }
    }
    return names.sort();
  }

  /**
   * The queue files on disk, open or not, and the bytes they take with their logs and indexes:
   * from the directory's listing and the files' sizes, without opening any (a file another
   * program left here counts as a queue).
   */
  diskUsage(): { queues: number; bytes: number } {
    let queues = 0;
    let bytes = 0;
    for (const file of readdirSync(this.dir)) {
      if (!/\.sqlite(-wal|-shm)?$/.test(file)) continue;
      if (file.endsWith(".sqlite")) queues += 1;
      // A queue dropped meanwhile has no file left to measure.
      bytes += statSync(join(this.dir, file), { throwIfNoEntry: false })?.size ?? 0;
    }
    return { queues, bytes };
  }

  /** A name maps to a file name that is safe on every filesystem and unique per name. */
  pathOf(name: string): string {
    const slug = name.replace(/[^A-Za-z0-9_-]+/g, "_").slice(-60);
    const hash = createHash("sha256").update(name).digest("hex").slice(0, 12);
    return join(this.dir, `${slug}-${hash}.sqlite`);
  }
}
