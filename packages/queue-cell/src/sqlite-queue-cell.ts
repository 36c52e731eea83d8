import { CellCore, type CellCoreOptions, type OpenStore } from "./queue-cell.ts";
import type { Durability } from "./sqlite-file.ts";
import { SqliteCellStore } from "./sqlite-store.ts";
import type { CellStore } from "./store.ts";
import type { SyncFile } from "./wal-sync.ts";

export interface QueueCellOptions extends Omit<CellCoreOptions, "store" | "file"> {
  /** The SQLite file. Ignored when `store` is given. */
  path?: string;
  /** Another storage backend (it must pass the conformance suite). */
  store?: CellStore;
  durability?: Durability;
  /** How the SQLite store flushes its log (fs.fdatasync); the host times it. */
  syncFile?: SyncFile;
}

/**
 * One queue (see CellCore), kept in the SQLite file at `path` unless given another store. The
 * cell's rules know only the CellStore interface; this is where SQLite is chosen.
 */
export class QueueCell extends CellCore {
  constructor(options: QueueCellOptions) {
    const { path, store, durability, syncFile, ...rest } = options;
    if (store === undefined && path === undefined) throw new TypeError("QueueCell needs a path or a store");
    const opened = store ?? openSqliteStore(path!, durability ?? "full", syncFile);
    super({ ...rest, store: opened, file: store === undefined ? path : undefined });
  }
}

/** Opens the SQLite store at `path` for a cell, with the cell's clock and its words for failures. */
function openSqliteStore(path: string, durability: Durability, syncFile: SyncFile | undefined): OpenStore {
  return ({ clock, backgroundFailed }) => {
    const store: SqliteCellStore = new SqliteCellStore(path, {
      durability,
      clock,
      ...(syncFile === undefined ? {} : { syncFile }),
      // The store's own background work: the checkpoint, tried again after the next flush unless
      // its flush failed (then the store takes no more writes: its `failed`, the error told
      // here); and the compaction of a mostly free file, which loses nothing when it fails.
      onBackgroundError: (error, work) =>
        work === "compaction"
          ? backgroundFailed("giving its file's free space back", "tried again later", error)
          : backgroundFailed(
              "copying its log into its database file",
              store.failed === error ? "not tried again" : "tried again after the next flush",
              error,
            ),
    });
    return store;
  };
}
