import { join } from "node:path";
import Database from "better-sqlite3";
import {
  ManualClock,
  QueueCell,
  SqliteCellStore,
  UlidSource,
  seededRandomFill,
  type CellStore,
  type LeasedMessage,
  type OutgoingMessage,
  type QueueCellOptions,
  type SyncFile,
} from "../src/index.ts";
import { tempDir } from "./temp-dir.ts";

export const encoder = new TextEncoder();
export const decoder = new TextDecoder();

export function text(body: string, extra: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return { body: encoder.encode(body), contentType: "text", ...extra };
}

export function bodies(messages: readonly LeasedMessage[]): string[] {
  return messages.map((m) => decoder.decode(m.body));
}

export function refs(messages: readonly LeasedMessage[]): Array<{ id: string; leaseGeneration: number }> {
  return messages.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration }));
}

/**
 * A cell "q" on a fresh file with a manual clock and `options`; open("q") gives the same file a
 * new cell; other names (dead-letter targets) open with defaults.
 */
export function cellHarness(options: Partial<QueueCellOptions> = {}) {
  const dir = tempDir();
  const clock = new ManualClock();
  const ids = new UlidSource(seededRandomFill(7));
  const others = new Map<string, QueueCell>();
  const open = (name: string, extra: Partial<QueueCellOptions> = name === "q" ? options : {}): QueueCell =>
    new QueueCell({
      name,
      path: join(dir, `${name}.sqlite`),
      clock,
      ids,
      durability: "off",
      resolveCell: async (queue) => {
        let cell = others.get(queue);
        if (cell === undefined || cell.isClosed) {
          cell = open(queue);
          others.set(queue, cell);
        }
        return cell;
      },
      ...extra,
    });
  // A dead-letter move into "q" (a loop) reaches the harness's own cell, as the registry's would.
  const cell = open("q");
  others.set("q", cell);
  return {
    dir,
    clock,
    open,
    cell,
    /** The cell a dead-letter move opened (or opens it). */
    other: async (name: string): Promise<QueueCell> => {
      let cell = others.get(name);
      if (cell === undefined) {
        cell = open(name);
        others.set(name, cell);
      }
      return cell;
    },
  };
}

/** Counts transactions, and can be told to fail the next one, or every one while the disk is full. */
export class ObservedStore {
  transactions = 0;
  failNext = false;
  /** The number of the transaction (counted from 1, as `transactions`) to fail as failNext does. */
  failAt: number | undefined;
  /** Every transaction fails as SQLite's does on a full disk, after its writes (rolled back). */
  diskFull = false;
  constructor(readonly inner: CellStore) {}
  wrap(): CellStore {
    return new Proxy(this.inner, {
      get: (target, key, receiver) => {
        if (key === "transaction") {
          return <T>(fn: () => T): T => {
            this.transactions += 1;
            return target.transaction(() => {
              const result = fn();
              if (this.failNext || this.transactions === this.failAt) {
                this.failNext = false;
                throw new Database.SqliteError("disk I/O error (injected)", "SQLITE_IOERR");
              }
              if (this.diskFull) throw new Database.SqliteError("database or disk is full", "SQLITE_FULL");
              return result;
            });
          };
        }
        const value = Reflect.get(target, key, receiver) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}

export function sqliteStore(dir: string, name = "observed"): SqliteCellStore {
  return new SqliteCellStore(join(dir, `${name}.sqlite`), { durability: "off" });
}

/** Lets queued timer callbacks and write-loop groups run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Polls `ready` on real time: the checkpointer's thread runs on its own, not on the test's clock. */
export async function until(ready: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ready()) {
    if (Date.now() > end) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A flush the test completes by hand, so it can see what waits for the disk. */
export function heldSync() {
  const held: Array<(error: Error | null) => void> = [];
  const syncFile: SyncFile = (_fd, done) => void held.push(done);
  return {
    syncFile,
    get calls() {
      return held.length;
    },
    /** Completes the oldest flush still running. */
    finish(error: Error | null = null) {
      const done = held.shift();
      if (done === undefined) throw new Error("no flush is running");
      done(error);
    },
  };
}
