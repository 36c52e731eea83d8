import { readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { isConfigError, loadDeployment, type WorkerConfig } from "../config/index.ts";
import { isFile } from "../config/load.ts";
import { D1InUseError, d1ErrorText, withLocalD1 } from "../d1/local-database.ts";
import { MigrationFailedError, applyMigrations, migrationStates } from "../d1/migrations.ts";
import { sqlStatements } from "../d1/sql-statements.ts";
import { UsageError, environmentName, findConfig, parseOptions } from "./args.ts";
import { exitStatus } from "./exit-status.ts";

/**
 * `celld d1 migrations list|apply DATABASE` and `celld d1 execute DATABASE --command SQL | --file
 * FILE`: the D1 databases of a deployment, as `wrangler d1 ... --local` reaches wrangler dev's.
 * DATABASE is a `database_name` or a `binding`, as in wrangler; the config and the data directory
 * are found as `celld dev` finds them.
 */


export interface D1Args {
  action: "migrations list" | "migrations apply" | "execute";
  database: string;
  configs: string[];
  environment: string | undefined;
  dataDir: string;
  command: string | undefined;
  file: string | undefined;
}

export function parseD1Args(argv: string[], cwd: string, processEnv: Readonly<Record<string, string | undefined>> = {}): D1Args {
  const [first, second] = argv;
  const action =
    first === "execute" ? "execute" : first === "migrations" && (second === "list" || second === "apply") ? (`migrations ${second}` as const) : undefined;
  if (action === undefined) {
    throw new UsageError(`celld d1 takes "migrations list", "migrations apply" or "execute", got ${JSON.stringify(argv.slice(0, 2).join(" "))}`);
  }
  const { values, positionals } = parseOptions({
    args: argv.slice(action === "execute" ? 1 : 2),
    options: {
      config: { type: "string", short: "c", multiple: true },
      env: { type: "string", short: "e" },
      data: { type: "string" },
      ...(action === "execute" ? { command: { type: "string" }, file: { type: "string" } } : {}),
    },
    strict: true,
    allowPositionals: true,
  });
  if (positionals.length !== 1) throw new UsageError(`celld d1 ${action} takes one DATABASE (a database_name or binding), got ${positionals.length}`);
  const command = (values as { command?: string }).command;
  const file = (values as { file?: string }).file;
  if (action === "execute" && (command === undefined) === (file === undefined)) {
    throw new UsageError("celld d1 execute takes one of --command SQL or --file FILE");
  }
  let configs = values.config ?? [];
  if (configs.length === 0) {
    const found = findConfig(cwd);
    if (found === undefined) throw new UsageError(`no config given and no wrangler config in ${cwd} or a parent directory; pass -c FILE`);
    configs = [found.path];
  }
  return {
    action,
    database: positionals[0]!,
    configs,
    environment: environmentName(values.env, processEnv),
    dataDir: resolve(cwd, values.data ?? join(dirname(resolve(cwd, configs[0]!)), ".celld")),
    command,
    file: file === undefined ? undefined : resolve(cwd, file),
  };
}

type D1Config = WorkerConfig["d1Databases"][number] & { worker: string; migrationsDir: string; migrationsTable: string };

/** The database DATABASE names: by database_name first, then by binding, across the Workers. */
export function findDatabase(workers: readonly WorkerConfig[], name: string): D1Config {
  // Read from a config, every database has its migrations settings (defaults filled).
  const all = workers.flatMap((w) =>
    w.d1Databases.map((db) => ({ ...db, worker: w.name, migrationsDir: db.migrationsDir!, migrationsTable: db.migrationsTable! })),
  );
  const found = all.find((db) => db.databaseName === name) ?? all.find((db) => db.binding === name);
  if (found !== undefined) return found;
  const known = all.map((db) => `${db.databaseName} (${db.binding})`).join(", ");
  throw new UsageError(`no D1 database named or bound as "${name}" in the config (${known === "" ? "it has none" : `its databases: ${known}`})`);
}

export async function d1(args: D1Args): Promise<number> {
  let workers: WorkerConfig[];
  try {
    workers = loadDeployment(args.configs, { environment: args.environment }).workers;
  } catch (error) {
    if (!isConfigError(error)) throw error;
    console.error(`celld: the config does not load, so its D1 databases are not known:\n${error.message}`);
    return exitStatus.config;
  }
  const db = findDatabase(workers, args.database);
  try {
    return await withLocalD1(args.dataDir, db.databaseId, (local) => {
      if (args.action === "execute") return execute(local, args);
      return args.action === "migrations list" ? list(local, db) : apply(local, db);
    });
  } catch (error) {
    if (error instanceof D1InUseError) {
      console.error(`celld: ${error.message}`);
      return exitStatus.failed;
    }
    throw error;
  }
}

type Local = Parameters<Parameters<typeof withLocalD1>[2]>[0];

function where(db: D1Config): string {
  return `D1 database "${db.databaseName}" (env.${db.binding} of ${db.worker}), migrations in ${relative(process.cwd(), db.migrationsDir) || "."}, recorded in ${db.migrationsTable}`;
}

async function list(local: Local, db: D1Config): Promise<number> {
  const { files, unknown } = await migrationStates(local, db.migrationsDir, db.migrationsTable);
  console.log(`${where(db)}:`);
  for (const f of files) console.log(f.appliedAt === undefined ? `  pending                       ${f.name}` : `  applied ${f.appliedAt}  ${f.name}`);
  for (const f of unknown) console.log(`  applied ${f.appliedAt}  ${f.name} (its file is no longer in the directory)`);
  const pending = files.filter((f) => f.appliedAt === undefined).length;
  console.log(`${files.length - pending} applied, ${pending} pending`);
  return exitStatus.ok;
}

async function apply(local: Local, db: D1Config): Promise<number> {
  console.log(`${where(db)}:`);
  try {
    const applied = await applyMigrations(local, db.migrationsDir, db.migrationsTable, (name) => console.log(`  applied ${name}`));
    console.log(applied.length === 0 ? "no migrations to apply: every file is applied" : `${applied.length} applied`);
    return exitStatus.ok;
  } catch (error) {
    if (!(error instanceof MigrationFailedError)) throw error;
    console.error(`celld: ${error.message}`);
    console.error(`${error.applied.length} applied before it; the migrations after it were not tried`);
    return exitStatus.failed;
  }
}

async function execute(local: Local, args: D1Args): Promise<number> {
  let sql: string;
  if (args.file === undefined) sql = args.command!;
  else {
    if (!isFile(args.file)) throw new UsageError(`--file ${args.file}: no such file`);
    sql = readFileSync(args.file, "utf8");
  }
  const statements = sqlStatements(sql);
  if (statements.length === 0) throw new UsageError("no SQL statement to run (only whitespace or comments)");
  try {
    const results = await local.batch(statements.map((s) => ({ sql: s })));
    // Rows as JSON, one statement's rows per line, so that a script can read them.
    for (const result of results) if (result.results.length > 0) console.log(JSON.stringify(result.results));
    console.log(`${statements.length} statement${statements.length === 1 ? "" : "s"} executed in one transaction`);
    return exitStatus.ok;
  } catch (error) {
    console.error(`celld: the SQL failed and was rolled back whole: ${d1ErrorText(error)}`);
    return exitStatus.failed;
  }
}
