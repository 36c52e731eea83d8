import { join } from "node:path";
import { Miniflare } from "miniflare";
import { DataDirInUseError, lockDataDir } from "../host/data-dir-lock.ts";

/**
 * A Worker's D1 database as `celld dev` keeps it, opened outside a running host: the same
 * Miniflare D1 storage under `<data>/miniflare/d1` (host.ts's defaultPersistRoot), reached through
 * Miniflare's own D1 binding as `wrangler d1 execute --local` reaches `.wrangler/state/v3/d1`, so
 * the file, its SQL dialect and D1's errors are the ones the Worker meets.
 *
 * The data directory is claimed for the whole operation (data-dir-lock.ts): workerd keeps a D1
 * database open while celld runs, and two processes writing one Durable Object's SQLite file is
 * unsafe, so a command run beside a running celld is refused, and a celld started meanwhile
 * refuses to start until the command is done.
 */

export class D1InUseError extends Error {
  readonly code = "ERR_D1_IN_USE" as const;
  constructor(inUse: DataDirInUseError) {
    super(
      `${inUse.message.replace(/; each queue has one writer.*$/, "")}; its workerd holds the D1 databases open, ` +
        "and two processes must not write one: stop celld, run this command, then start celld again",
    );
    this.name = "D1InUseError [ERR_D1_IN_USE]";
  }
}

export interface D1Statement {
  sql: string;
  params?: unknown[];
}

export interface D1Result {
  results: Record<string, unknown>[];
  meta: { changes?: number };
}

/** Runs `work` with the database `databaseId` of the data directory, then closes everything. */
export async function withLocalD1<T>(dataDir: string, databaseId: string, work: (db: LocalD1) => Promise<T>): Promise<T> {
  let release: () => void;
  try {
    release = lockDataDir(dataDir);
  } catch (error) {
    if (error instanceof DataDirInUseError) throw new D1InUseError(error);
    throw error;
  }
  let mf: Miniflare | undefined;
  try {
    mf = new Miniflare({
      modules: true,
      script: "export default {}",
      defaultPersistRoot: join(dataDir, "miniflare"),
      d1Databases: { DATABASE: databaseId },
      cf: false,
    });
    const db = await mf.getD1Database("DATABASE");
    return await work(new LocalD1(db));
  } finally {
    await mf?.dispose();
    release();
  }
}

// Miniflare returns workerd's D1Database type without exporting it.
type D1Database = Awaited<ReturnType<Miniflare["getD1Database"]>>;
type D1BatchResult = { results?: unknown[]; meta?: { changes?: number } };

export class LocalD1 {
  constructor(private readonly db: D1Database) {}

  /**
   * The statements in one D1 batch: one transaction, so a failing statement leaves nothing of the
   * others. Throws D1's error (its message as the Worker would see it).
   */
  async batch(statements: readonly D1Statement[]): Promise<D1Result[]> {
    if (statements.length === 0) return [];
    const prepared = statements.map((s) => this.db.prepare(s.sql).bind(...(s.params ?? [])));
    const results: D1BatchResult[] = await this.db.batch(prepared);
    return results.map((r) => ({ results: (r.results ?? []) as Record<string, unknown>[], meta: { changes: r.meta?.changes } }));
  }
}

/** D1's error text without the wrapping that only repeats it. */
export function d1ErrorText(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause ?? error;
  return cause instanceof Error ? cause.message : String(cause);
}
