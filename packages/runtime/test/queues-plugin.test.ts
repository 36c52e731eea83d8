import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, onTestFinished, test } from "vitest";
import Database from "better-sqlite3";
import { CellRegistry, ManualClock } from "@celld/queue-cell";
import { MemoryHostLog } from "../src/host/host-log.ts";
import { QueuesPlugin } from "../src/plugins/queues-plugin.ts";
import { parseOne } from "./config-failure.ts";

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-plugin-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A Worker producing to "jobs" and "other" and consuming neither, on its own data directory. */
async function prepared(dir: string): Promise<{ registry: CellRegistry; log: MemoryHostLog; error: unknown; plugin: QueuesPlugin }> {
  const registry = new CellRegistry({ dataDir: dir, durability: "off" });
  onTestFinished(() => registry.closeAll());
  const log = new MemoryHostLog();
  const deployment = parseOne({
    queues: { producers: [{ binding: "JOBS", queue: "jobs" }, { binding: "OTHER", queue: "other" }] },
  });
  const plugin = new QueuesPlugin({ deployment, registry, clock: new ManualClock(), log, dataDir: dir });
  onTestFinished(() => plugin.dispose());
  const error = await plugin.prepare().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  return { registry, log, error, plugin };
}

test("a queue whose file is damaged, or of a newer celld, is left unopened and named in the log; the other queues open", async () => {
  const dir = dataDir();
  const registry = new CellRegistry({ dataDir: dir, durability: "off" });
  const jobs = registry.pathOf("jobs");
  const cases: Array<[string, () => void, RegExp]> = [
    ["not a database", () => writeFileSync(jobs, "not a queue\n".repeat(50)), /its file .* is damaged \(SQLITE_NOTADB: file is not a database\): keep a copy/],
    [
      "a newer format",
      () => {
        rmSync(jobs, { force: true });
        const db = new Database(jobs);
        db.pragma("user_version = 1000");
        db.close();
      },
      /its file was written by a newer celld \(.*\); nothing in it was changed/,
    ],
    [
      "another queue's",
      () => {
        rmSync(jobs, { force: true });
        copyFileSync(registry.pathOf("other"), jobs);
      },
      /holds queue "other".*: it was copied or renamed there; nothing in it was changed: move it away/,
    ],
  ];
  // "other"'s file, for the case that copies it under "jobs"'s name.
  await registry.open("other");
  await registry.closeAll();
  for (const [name, spoil, words] of cases) {
    spoil();
    const { registry: opened, log, error, plugin } = await prepared(dir);
    expect(error, name).toBeUndefined();
    expect(opened.openNames(), name).toEqual(["other"]);
    const lines = log.lines.filter((l) => l.startsWith("error: "));
    expect(lines, name).toHaveLength(1);
    expect(lines[0], name).toContain(`queue "jobs" could not be opened, so its sends are refused and its consumer does not run`);
    expect(lines[0], name).toMatch(words);
    // At start there is no call: the cell's words for a refused call would mislead.
    expect(lines[0], name).not.toMatch(/this call|the queue's storage failed/);
    expect(plugin.unopenedQueues, name).toEqual(["jobs"]);
    await opened.closeAll();
  }
});

test("a failure of the whole directory still fails prepare, to stop the host", async () => {
  const dir = dataDir();
  const registry = new CellRegistry({ dataDir: dir, durability: "off" });
  // A directory where the queue's file belongs: SQLite cannot open it, and says nothing of damage.
  rmSync(registry.pathOf("jobs"), { force: true });
  mkdirSync(registry.pathOf("jobs"));
  const { error } = await prepared(dir);
  expect(error).toMatchObject({ code: "ERR_STORAGE", storage: { queue: "jobs", cause: "other" } });
});
