import type Database from "better-sqlite3";

/**
 * The layout of the API's own files (api/catalog.sqlite, api/keys.sqlite), kept in SQLite's
 * user_version as each queue file keeps its own (the cell's cellFormatVersion). Raise it when a
 * file this code writes could be misread or damaged by a celld that predates the change. Files
 * made before the number was kept have 0, and are this layout.
 */
export const apiStoreFormatVersion = 1;

/**
 * The file's layout, read before anything is written to it (journal_mode = WAL writes): one of a
 * newer celld is refused with nothing in it changed, since this code could misread its rows or
 * write rows that celld would misread.
 */
export function readApiStoreFormat(db: Database.Database, file: string): number {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > apiStoreFormatVersion) {
    throw Object.assign(
      new Error(`${file} is of format ${version}, and this celld reads formats up to ${apiStoreFormatVersion}`),
      // Read by storageCause as a file of a newer celld, as a queue file's is.
      { code: "ERR_STORE_FORMAT_NEWER" },
    );
  }
  return version;
}

/** Records this code's layout in a file that had an older number, once its schema is in place. */
export function stampApiStoreFormat(db: Database.Database, version: number): void {
  if (version < apiStoreFormatVersion) db.pragma(`user_version = ${apiStoreFormatVersion}`);
}
