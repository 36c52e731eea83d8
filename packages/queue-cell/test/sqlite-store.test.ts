import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect, test } from "vitest";
import { CellError, MessageState, SqliteCellStore, UlidSource, seededRandomFill, storageCause } from "../src/index.ts";
import { cellFormatVersion } from "../src/sqlite-sql.ts";
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
  // The columns of packs were added at the end of its rows: a pack works there as well.
  const later = ["b", "c", "d"].map((id) => ({ id, dueAt: 2_000, sentAt: 2_000, enqueuedAt: 2_000, contentType: "text", attributes: null, body: new TextEncoder().encode(id) }));
  store.transaction(() => store.insert(later));
  expect(store.transaction(() => store.lease(2_000, 2, 9_000)).map((m) => [m.id, new TextDecoder().decode(m.body)])).toEqual([
    ["b", "b"],
    ["c", "c"],
  ]);
  store.close();
  const reopened = new SqliteCellStore(path, { durability: "full" });
  expect(reopened.totals()).toMatchObject({ ready: 1, leased: 3 });
  expect(reopened.head("d")).toMatchObject({ state: MessageState.ready });
  reopened.close();
});

test("a send of messages due together is one row until one of them is treated apart", () => {
  const path = join(tempDir(), "packs.sqlite");
  const store = new SqliteCellStore(path, { durability: "full" });
  const message = (id: string, dueAt = 1_000) => ({ id, dueAt, sentAt: 900, enqueuedAt: 1_000, contentType: "text", attributes: null, body: new TextEncoder().encode(id) });
  const reader = new Database(path, { readonly: true });
  const rows = (): number => (reader.prepare("SELECT count(*) AS n FROM messages").get() as { n: number }).n;
  const letters = (from: string, count: number) => Array.from({ length: count }, (_, i) => String.fromCharCode(from.charCodeAt(0) + i));
  store.transaction(() => store.insert(letters("a", 100).map((id) => message(id))));
  expect(rows()).toBe(1);
  // Leased and acked whole, it stays one row to the end.
  const leased = store.transaction(() => store.lease(1_000, 100, 9_000));
  expect(rows()).toBe(1);
  store.transaction(() => store.removeHeld(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration }))));
  expect(rows()).toBe(0);
  // Not packed: a single message, messages due at different times, ids not rising, ids at or
  // below the last id of a pack the store has held (packs' ranges must not overlap).
  store.transaction(() => store.insert([message("x0")]));
  store.transaction(() => store.insert([message("x1"), message("x2", 2_000)]));
  store.transaction(() => store.insert([message("x4"), message("x3")]));
  store.transaction(() => store.insert([message("\u00a0a"), message("\u00a0b")]));
  expect(rows()).toBe(7);
  store.transaction(() => store.insert([message("\u0400a"), message("\u0400b")]));
  expect(rows()).toBe(8);
  // A lease of part of a pack unpacks it into a row for each message.
  expect(store.transaction(() => store.lease(1_000, 7, 9_000)).map((m) => m.id)).toEqual(["x0", "x1", "x4", "x3", "\u00a0a", "\u00a0b", "\u0400a"]);
  expect(rows()).toBe(9);
  reader.close();
  store.close();
});

test("a pack stored short (a cell's own ids): leased whole, found by id, unpacked, acked, and kept across a reopen", () => {
  const path = join(tempDir(), "short.sqlite");
  let store = new SqliteCellStore(path, { durability: "full" });
  const ids = new UlidSource(seededRandomFill(5));
  const send = (n: number) =>
    Array.from({ length: n }, (_, i) => ({ id: ids.next(1_000), dueAt: 1_000, sentAt: 900, enqueuedAt: 1_000, contentType: "json", attributes: null, body: new TextEncoder().encode(`"m${i}"`) }));
  const first = send(100);
  const second = send(10);
  store.transaction(() => store.insert(first));
  store.transaction(() => store.insert(second));
  const reader = new Database(path, { readonly: true });
  const lists = reader.prepare("SELECT pack FROM messages ORDER BY seq").all() as Array<{ pack: string }>;
  // Each list is the short form: the first id, what the messages share, and their lengths.
  expect(lists.map((row) => Object.keys(JSON.parse(row.pack) as object))).toEqual([["first", "sentAt", "contentType", "lengths"], ["first", "sentAt", "contentType", "lengths"]]);
  expect(lists[0]!.pack.length).toBeLessThan(500);
  reader.close();
  const bodyOf = (m: { body: Uint8Array }) => new TextDecoder().decode(m.body);
  // Leased whole: every id and body as sent.
  const leased = store.transaction(() => store.lease(1_000, 100, 9_000));
  expect(leased.map((m) => [m.id, bodyOf(m), m.sentAt, m.contentType])).toEqual(first.map((m) => [m.id, bodyOf(m), 900, "json"]));
  // Found by id, at either end and inside.
  for (const m of [first[0]!, first[57]!, first[99]!, second[9]!]) expect(store.head(m.id)).toMatchObject({ id: m.id });
  expect(store.head(`${first[99]!.id.slice(0, 25)}?`)).toBeUndefined();
  // A lease of part of the second pack unpacks it, each message keeping its id and body.
  const part = store.transaction(() => store.lease(1_000, 4, 9_000));
  expect(part.map((m) => [m.id, bodyOf(m)])).toEqual(second.slice(0, 4).map((m) => [m.id, bodyOf(m)]));
  // Acks of the whole first pack and of part of the unpacked rest.
  const removed = store.transaction(() => store.removeHeld([...leased, ...part.slice(0, 2)].map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration }))));
  expect(removed.size).toBe(102);
  store.close();
  store = new SqliteCellStore(path, { durability: "full" });
  expect(store.totals()).toMatchObject({ ready: 6, leased: 2 });
  const rest = store.transaction(() => store.lease(1_000, 100, 9_000));
  expect(rest.map((m) => [m.id, bodyOf(m)])).toEqual(second.slice(4).map((m) => [m.id, bodyOf(m)]));
  store.close();
});

test("a file of a format newer than this code is refused, naming the file, and not a byte of it is changed", () => {
  const path = join(tempDir(), "cell.sqlite");
  const made = new SqliteCellStore(path, { durability: "full" });
  made.transaction(() => made.insert([{ id: "a", dueAt: 1, sentAt: 1, enqueuedAt: 1, contentType: "text", attributes: null, body: new Uint8Array([97]) }]));
  made.close();
  // As a later celld would mark a layout this one cannot read.
  const later = new Database(path);
  later.pragma(`user_version = ${cellFormatVersion + 1}`);
  later.close();
  const before = readFileSync(path);

  let error: unknown;
  try {
    new SqliteCellStore(path, { durability: "full" });
  } catch (thrown) {
    error = thrown;
  }
  expect(error).toBeInstanceOf(CellError);
  expect((error as CellError).message).toBe(
    `the queue's storage failed: opening ${path}: written by a newer celld (its format is ${cellFormatVersion + 1}, and this celld ` +
      `reads formats up to ${cellFormatVersion}); nothing in it was changed: run that celld or a newer one on this data directory`,
  );
  expect(storageCause(error).cause).toBe("newer-format");
  expect(readFileSync(path).equals(before)).toBe(true);
  expect(existsSync(`${path}-wal`)).toBe(false);
});

test("a file is marked with this code's format; one from before the format was kept is marked at open", () => {
  const path = join(tempDir(), "cell.sqlite");
  const userVersion = () => {
    const db = new Database(path, { readonly: true });
    try {
      return db.pragma("user_version", { simple: true });
    } finally {
      db.close();
    }
  };
  new SqliteCellStore(path, { durability: "full" }).close();
  expect(userVersion()).toBe(cellFormatVersion);
  const old = new Database(path);
  old.pragma("user_version = 0");
  old.close();
  new SqliteCellStore(path, { durability: "full" }).close();
  expect(userVersion()).toBe(cellFormatVersion);
});
