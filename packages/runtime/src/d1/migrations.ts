import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { LocalD1 } from "./local-database.ts";
import { sqlStatements } from "./sql-statements.ts";

/**
 * D1 migrations as `wrangler d1 migrations apply --local` keeps them, so a project can move
 * between wrangler and celld and see one history: the `.sql` files of the migrations directory,
 * in order of their number (the name's part before the first "_"), then of their name; each applied
 * one recorded by name in the table wrangler creates (default `d1_migrations`), with its own
 * columns, so each tool sees what the other applied.
 *
 * Each migration runs with its record in one D1 batch (one transaction): a file that fails leaves
 * nothing of itself, not even the statements before the failing one, and is not recorded; the
 * ones before it stay applied, and the ones after it are not tried.
 */

export interface MigrationState {
  name: string;
  /** When it was applied (the table's `applied_at`, UTC), or undefined when it is pending. */
  appliedAt: string | undefined;
}

export class MigrationFailedError extends Error {
  readonly code = "ERR_D1_MIGRATION" as const;
  constructor(
    readonly migration: string,
    readonly reason: string,
    readonly applied: string[],
  ) {
    super(`migration ${migration} failed and was rolled back whole, so none of it was applied: ${reason}`);
    this.name = "MigrationFailedError [ERR_D1_MIGRATION]";
  }
}

/** wrangler's CREATE TABLE, column for column, so either tool reads the other's rows. */
export function migrationsTableSql(table: string): string {
  return (
    `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(table)}(\n` +
    "\t\tid         INTEGER PRIMARY KEY AUTOINCREMENT,\n" +
    "\t\tname       TEXT UNIQUE,\n" +
    "\t\tapplied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL\n" +
    ");"
  );
}

/** The migration files, in the order wrangler applies them. */
export function migrationFiles(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith(".sql") && statSync(join(dir, name)).isFile());
  } catch (error) {
    if ((error as { code?: unknown }).code === "ENOENT") throw new Error(`no migrations directory at ${dir} (migrations_dir)`);
    throw error;
  }
  const number = (name: string) => Number.parseInt(name.split("_")[0] ?? "", 10);
  return names.sort((a, b) => {
    const [na, nb] = [number(a), number(b)];
    if (na !== nb && !Number.isNaN(na) && !Number.isNaN(nb)) return na - nb;
    return a < b ? -1 : a > b ? 1 : 0;
  });
}

/** Every migration file with when it was applied, and applied names whose file is gone. */
export async function migrationStates(db: LocalD1, dir: string, table: string): Promise<{ files: MigrationState[]; unknown: MigrationState[] }> {
  const [, listed] = await db.batch([{ sql: migrationsTableSql(table) }, { sql: `SELECT name, applied_at FROM ${quoteIdentifier(table)} ORDER BY id` }]);
  const applied = new Map((listed?.results ?? []).map((row) => [String(row["name"]), String(row["applied_at"])]));
  const files = migrationFiles(dir).map((name) => ({ name, appliedAt: applied.get(name) }));
  const onDisk = new Set(files.map((f) => f.name));
  const unknown = [...applied].filter(([name]) => !onDisk.has(name)).map(([name, appliedAt]) => ({ name, appliedAt }));
  return { files, unknown };
}

/**
 * Applies the pending migrations in order, each whole or not at all. Returns the names applied;
 * throws MigrationFailedError at the first that fails, naming it and D1's error.
 */
export async function applyMigrations(
  db: LocalD1,
  dir: string,
  table: string,
  onApplied: (name: string) => void = () => {},
): Promise<string[]> {
  const { files } = await migrationStates(db, dir, table);
  const applied: string[] = [];
  for (const { name } of files.filter((f) => f.appliedAt === undefined)) {
    const statements = sqlStatements(readFileSync(join(dir, name), "utf8")).map((sql) => ({ sql }));
    try {
      await db.batch([...statements, { sql: `INSERT INTO ${quoteIdentifier(table)} (name) VALUES (?)`, params: [name] }]);
    } catch (error) {
      throw new MigrationFailedError(name, errorText(error), applied);
    }
    applied.push(name);
    onApplied(name);
  }
  return applied;
}

function errorText(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause ?? error;
  return cause instanceof Error ? cause.message : String(cause);
}

/** A table name as SQL: wrangler pastes it as it is, celld quotes it (the same for a plain name). */
function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
