import { statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, test } from "vitest";
import { WalIndex } from "../src/wal-index.ts";
import { tempDir } from "./temp-dir.ts";

test("reads how much log is not yet in the database, across a checkpoint that keeps the log file", () => {
  const path = join(tempDir(), "w.sqlite");
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("wal_autocheckpoint = 0");
  db.exec("CREATE TABLE t (x BLOB)");
  const index = WalIndex.open(`${path}-shm`);
  const insert = db.prepare("INSERT INTO t (x) VALUES (?)");
  for (let i = 0; i < 50; i++) insert.run(Buffer.alloc(3_000));
  const written = index.uncheckpointedBytes();
  // Every frame is a page plus a 24-byte header; the file also has a 32-byte header.
  expect(written).toBe(statSync(`${path}-wal`).size - 32);
  expect(written % (4_096 + 24)).toBe(0);

  db.pragma("wal_checkpoint(RESTART)");
  expect(index.uncheckpointedBytes()).toBe(0);
  const fileSize = statSync(`${path}-wal`).size;
  insert.run(Buffer.alloc(10));
  // The next commit writes over the start of the same file: only its own frames count.
  expect(index.uncheckpointedBytes()).toBeGreaterThan(0);
  expect(index.uncheckpointedBytes()).toBeLessThan(4 * (4_096 + 24));
  expect(statSync(`${path}-wal`).size).toBe(fileSize);
  index.close();
  db.close();
});
