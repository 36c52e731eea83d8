import { spawn } from "node:child_process";
import { cpSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { run } from "./cli-harness.ts";
import { tidyAfterEach } from "./host-harness.ts";

/**
 * `celld d1 migrations list|apply` and `celld d1 execute` as a user runs them (the CLI from its bin
 * script), on copies of the corpus's D1 projects, against the same database the Worker then reads
 * under real workerd; and against wrangler 4.86's own `d1 migrations --local`, so that a project
 * moving between the two sees one history.
 *
 * Each command starts a workerd, as `wrangler d1 ... --local` does: 20-40 s a command on the
 * shared 2-core machine under load (the file took 9 minutes there), hence the long timeouts.
 */

const { project, runHost } = tidyAfterEach();
const fixtures = join(import.meta.dirname, "fixtures", "projects");
const wranglerBin = join(import.meta.dirname, "..", "node_modules", "wrangler", "bin", "wrangler.js");

function copyOf(name: string) {
  const p = project();
  cpSync(join(fixtures, name), p.dir, { recursive: true });
  return p;
}

async function celld(args: string[], cwd: string): Promise<{ status: number | null; output: string }> {
  const r = run(args, cwd);
  const status = await r.exited;
  return { status, output: r.output() };
}

/** wrangler itself, offline: no metrics, no update check, no prompts. */
function wrangler(args: string[], cwd: string): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve) => {
    const env = { ...process.env, CI: "1", WRANGLER_SEND_METRICS: "false", WRANGLER_LOG_PATH: join(cwd, ".wrangler-logs") };
    const proc = spawn(process.execPath, [wranglerBin, ...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    proc.stdout.on("data", (d: Buffer) => (output += d.toString()));
    proc.stderr.on("data", (d: Buffer) => (output += d.toString()));
    proc.on("close", (status) => resolve({ status, output }));
  });
}

test("apply, then the Worker sees the tables; apply again changes nothing; list shows each file applied", { timeout: 600_000 }, async () => {
  const p = copyOf("d1-notes");
  const pending = await celld(["d1", "migrations", "list", "notes-db"], p.dir);
  expect(pending.status).toBe(0);
  expect(pending.output).toMatch(/pending\s+0001_create_notes\.sql\n\s+pending\s+0002_add_tags\.sql\n0 applied, 2 pending/);

  const applied = await celld(["d1", "migrations", "apply", "DB"], p.dir);
  expect(applied.output).toContain("  applied 0001_create_notes.sql\n  applied 0002_add_tags.sql\n2 applied");
  expect(applied.status).toBe(0);
  const again = await celld(["d1", "migrations", "apply", "notes-db"], p.dir);
  expect(again.output).toContain("no migrations to apply: every file is applied");
  const listed = await celld(["d1", "migrations", "list", "DB"], p.dir);
  expect(listed.output).toMatch(/applied \d{4}-\d\d-\d\d \d\d:\d\d:\d\d {2}0001_create_notes\.sql\n {2}applied .* {2}0002_add_tags\.sql\n2 applied, 0 pending/);

  const h = await runHost([join(p.dir, "wrangler.jsonc")], p.dataDir);
  expect(await (await h.fetch("/tables")).json()).toEqual(["d1_migrations", "notes"]);
  await h.fetch("/notes", { method: "POST", body: JSON.stringify({ body: "second", tag: "x" }) });
  expect(await (await h.fetch("/notes")).json()).toEqual([
    { id: 1, body: "welcome; the first note", tag: "intro" },
    { id: 2, body: "second", tag: "x" },
  ]);
  // While celld holds the data directory, the command is refused, naming what to do.
  const refused = await celld(["d1", "execute", "DB", "--command", "SELECT 1"], p.dir);
  expect(refused.status).toBe(1);
  expect(refused.output).toMatch(/the data directory .* is in use by another celld \(pid \d+\); its workerd holds the D1 databases open, and two processes must not write one: stop celld, run this command, then start celld again/);
  await h.close();

  const executed = await celld(["d1", "execute", "DB", "--command", "SELECT body FROM notes WHERE tag = 'x'; SELECT count(*) AS n FROM d1_migrations"], p.dir);
  expect(executed.output).toContain('[{"body":"second"}]\n[{"n":2}]\n2 statements executed in one transaction');
});

test("a failing migration is rolled back whole and named with D1's error; those before it stay, those after are not tried", { timeout: 600_000 }, async () => {
  const p = copyOf("d1-broken-migration");
  const failed = await celld(["d1", "migrations", "apply", "INVENTORY"], p.dir);
  expect(failed.status).toBe(1);
  expect(failed.output).toContain("  applied 0001_items.sql\n");
  expect(failed.output).toContain("celld: migration 0002_locations.sql failed and was rolled back whole, so none of it was applied: ");
  expect(failed.output).toContain("so none of it was applied: no such table: stock: SQLITE_ERROR\n");
  expect(failed.output).toContain("1 applied before it; the migrations after it were not tried");
  // Its first statements (CREATE TABLE locations, an INSERT) went with it.
  const tables = await celld(["d1", "execute", "inventory-db", "--command", "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('items', 'locations', 'd1_migrations') ORDER BY name"], p.dir);
  expect(tables.output).toContain('[{"name":"d1_migrations"},{"name":"items"}]');
  const listed = await celld(["d1", "migrations", "list", "inventory-db"], p.dir);
  expect(listed.output).toMatch(/applied .* {2}0001_items\.sql\n {2}pending +0002_locations\.sql\n {2}pending +0003_prices\.sql\n1 applied, 2 pending/);

  // Mended, the same command goes on from the file that failed.
  const file = join(p.dir, "db", "migrations", "0002_locations.sql");
  writeFileSync(file, "CREATE TABLE locations (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\nINSERT INTO locations (id, name) VALUES (1, 'main');\n");
  const mended = await celld(["d1", "migrations", "apply", "INVENTORY"], p.dir);
  expect(mended.output).toContain("  applied 0002_locations.sql\n  applied 0003_prices.sql\n2 applied");
  const h = await runHost([join(p.dir, "wrangler.toml")], p.dataDir);
  expect(await (await h.fetch("/")).json()).toEqual([{ sku: "apple", quantity: 3 }, { sku: "pear", quantity: 5 }]);
});

test("execute: --file runs in one transaction, a failing statement undoes the others; a name no database has is refused", { timeout: 600_000 }, async () => {
  const p = copyOf("d1-notes");
  writeFileSync(join(p.dir, "seed.sql"), "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT);\nINSERT INTO kv VALUES ('a', 'semi;colon');\nINSERT INTO missing VALUES (1);\n");
  const failed = await celld(["d1", "execute", "DB", "--file", "seed.sql"], p.dir);
  expect(failed.status).toBe(1);
  expect(failed.output).toMatch(/celld: the SQL failed and was rolled back whole: .*no such table: missing/);
  const none = await celld(["d1", "execute", "DB", "--command", "SELECT count(*) AS n FROM sqlite_master WHERE name = 'kv'"], p.dir);
  expect(none.output).toContain('[{"n":0}]');
  const unknown = await celld(["d1", "migrations", "list", "nope"], p.dir);
  expect(unknown.status).toBe(2);
  expect(unknown.output).toContain('celld: no D1 database named or bound as "nope" in the config (its databases: notes-db (DB))');
});

test("one history with wrangler d1 migrations --local: each sees what the other applied", { timeout: 600_000 }, async () => {
  // wrangler keeps local D1 under <persist-to>/v3/d1, celld under <data>/miniflare/d1: the same
  // Miniflare files, so a copy moves a database between the two.
  const p = copyOf("d1-notes");
  const wranglerState = join(p.dir, ".wrangler-state");
  const byWrangler = await wrangler(["d1", "migrations", "apply", "notes-db", "--local", "--persist-to", wranglerState], p.dir);
  expect(byWrangler.status, byWrangler.output).toBe(0);
  mkdirSync(join(p.dataDir, "miniflare"), { recursive: true });
  cpSync(join(wranglerState, "v3", "d1"), join(p.dataDir, "miniflare", "d1"), { recursive: true });
  const listed = await celld(["d1", "migrations", "list", "notes-db"], p.dir);
  expect(listed.output).toContain("2 applied, 0 pending");

  // And back: a migration celld applies, wrangler finds applied.
  writeFileSync(join(p.dir, "migrations", "0003_pinned.sql"), "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;\n");
  const byCelld = await celld(["d1", "migrations", "apply", "notes-db"], p.dir);
  expect(byCelld.output).toContain("  applied 0003_pinned.sql\n1 applied");
  rmSync(join(wranglerState, "v3", "d1"), { recursive: true });
  cpSync(join(p.dataDir, "miniflare", "d1"), join(wranglerState, "v3", "d1"), { recursive: true });
  const seen = await wrangler(["d1", "migrations", "list", "notes-db", "--local", "--persist-to", wranglerState], p.dir);
  expect(seen.status, seen.output).toBe(0);
  expect(seen.output).toContain("No migrations to apply!");
});
