import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, test } from "vitest";
import { SqliteCellStore } from "../src/index.ts";
import { describeStoreConformance } from "./store-conformance.ts";
import { tempDir } from "./temp-dir.ts";

describeStoreConformance("SQLite", (dir) => new SqliteCellStore(join(dir, "cell.sqlite"), { durability: "full" }));

test("a file from before lease owners gets the column at open, keeping its rows", () => {
  const path = join(tempDir(), "old.sqlite");
  const old = new Database(path);
  // The messages table as the first release made it: no lease_owner.
  old.exec(`CREATE TABLE messages (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, state INTEGER NOT NULL,
    due_at INTEGER NOT NULL, deliveries INTEGER NOT NULL DEFAULT 0, lease_generation INTEGER NOT NULL DEFAULT 0,
    sent_at INTEGER NOT NULL, enqueued_at INTEGER NOT NULL, bytes INTEGER NOT NULL, content_type TEXT NOT NULL,
    attributes TEXT, body BLOB NOT NULL)`);
  old.prepare(`INSERT INTO messages (id, state, due_at, sent_at, enqueued_at, bytes, content_type, body)
    VALUES ('a', 0, 1000, 900, 1000, 1, 'text', x'61')`).run();
  old.close();
  const store = new SqliteCellStore(path, { durability: "full" });
  expect(store.totals()).toMatchObject({ ready: 1 });
  const [leased] = store.transaction(() => store.lease(1_000, 10, 9_000, 3));
  expect(leased).toMatchObject({ id: "a", deliveries: 1, leaseGeneration: 1 });
  expect(store.leasedBy(3, 10).map((h) => h.id)).toEqual(["a"]);
  store.close();
});
