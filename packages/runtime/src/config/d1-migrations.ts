import { relative } from "node:path";
import type { ConfigWarning } from "./issues.ts";
import type { WorkerConfig } from "./model.ts";

/**
 * A D1 database with a migrations directory gets one line at start: `celld dev`, like `wrangler
 * dev`, applies no migrations, and a Worker whose tables are missing fails in ways that do not
 * say so ("no such table"). The line names the command that applies them (d1/ and cli/d1.ts).
 */
export function d1MigrationHints(
  file: string,
  worker: Pick<WorkerConfig, "d1Databases" | "configPath">,
  directoryExists: (path: string) => boolean,
): ConfigWarning[] {
  return worker.d1Databases.flatMap((db, i) => {
    if (db.migrationsDir === undefined || !directoryExists(db.migrationsDir)) return [];
    const near = relative(process.cwd(), db.migrationsDir);
    const dir = near === "" ? "." : near.startsWith("..") ? db.migrationsDir : near;
    const configFlag = file === "" ? "" : ` -c ${file}`;
    return [
      {
        file,
        path: `d1_databases[${i}]`,
        message:
          `D1 database "${db.databaseName}" has migrations in ${dir}, which celld dev does not apply (nor does ` +
          `wrangler dev); see which are applied with "celld d1 migrations list ${db.databaseName}${configFlag}" and ` +
          `apply the rest with "celld d1 migrations apply ${db.databaseName}${configFlag}" while celld is stopped`,
      },
    ];
  });
}
