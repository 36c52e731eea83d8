import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, test } from "vitest";
import { cellFormatVersion } from "../src/sqlite-sql.ts";
import { bodies, cellHarness, decoder, encoder, refs, settle, text } from "./cell-harness.ts";

/**
 * Queue files as older cellds wrote them, opened by this one: an upgrade is a restart of a newer
 * commit on the same data directory, so every message must come back with its id, body, delivery
 * count, delay and state. The schemas below are copied from each commit's sqlite-sql.ts; the rows
 * are shaped as `celld dev` at those commits wrote them (seen with sqlite3 in directories a Worker
 * and the native API filled, then started with this celld):
 *   c46ba4f  before packs (51e2627): one row a message, no n/last_id/pack, user_version 0
 *   10ce952  packs with short lists (30eeeeb) and full lists (51e2627, and any message with
 *            attributes), user_version 0: the last commit before the number was kept (03a1213)
 *   4536557  user_version 1, receipts keyed by the time they were taken in: the last before
 *            dec8b29 keyed them by the message's entry into the queue it came from
 */

const schemaBeforePacks = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  state INTEGER NOT NULL,
  due_at INTEGER NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 0,
  lease_generation INTEGER NOT NULL DEFAULT 0,
  lease_owner INTEGER NOT NULL DEFAULT 0,
  sent_at INTEGER NOT NULL,
  enqueued_at INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  attributes TEXT,
  body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_state_due ON messages (state, due_at);
CREATE INDEX IF NOT EXISTS messages_dead_by_seq ON messages (seq) WHERE state = 2;
CREATE INDEX IF NOT EXISTS messages_moving_by_seq ON messages (seq) WHERE state = 3;
CREATE TABLE IF NOT EXISTS received (id TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID;
`;

const schemaWithPacks = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  state INTEGER NOT NULL,
  due_at INTEGER NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 0,
  lease_generation INTEGER NOT NULL DEFAULT 0,
  lease_owner INTEGER NOT NULL DEFAULT 0,
  sent_at INTEGER NOT NULL,
  enqueued_at INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  attributes TEXT,
  n INTEGER NOT NULL DEFAULT 1,
  last_id TEXT,
  pack TEXT,
  body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_state_due ON messages (state, due_at);
CREATE INDEX IF NOT EXISTS messages_dead_by_seq ON messages (seq) WHERE state = 2;
CREATE INDEX IF NOT EXISTS messages_moving_by_seq ON messages (seq) WHERE state = 3;
CREATE TABLE IF NOT EXISTS received (id TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS messages_packs_by_id ON messages (id) WHERE n > 1;
`;

/** When the old celld stopped; the test's clock starts here. */
const stoppedAt = 1_796_183_800_000;
const sentAt = stoppedAt - 60_000;
const minute = 60_000;
const hour = 3_600_000;

interface OldMessage {
  id: string;
  state: 0 | 1 | 2;
  dueAt: number;
  deliveries: number;
  leaseGeneration: number;
  contentType: string;
  attributes: string | null;
  body: string;
}

const ready = (id: string, body: string, extra: Partial<OldMessage> = {}): OldMessage => ({
  id,
  state: 0,
  dueAt: sentAt,
  deliveries: 0,
  leaseGeneration: 0,
  contentType: "json",
  attributes: null,
  body,
  ...extra,
});

// Ids as the old cellds made them for one send: successive, so a short list may derive them.
const single = ready("01M8TEB53JFJZR051V84QXX078", '"r-single"');
const shortPack = ["01M8TEB5RJ58SAVRVE0ZFAVAS9", "01M8TEB5RJ58SAVRVE0ZFAVASA", "01M8TEB5RJ58SAVRVE0ZFAVASB", "01M8TEB5RJ58SAVRVE0ZFAVASC"].map(
  (id, i) => ready(id, `"r-${i}"`),
);
// An API send: CloudEvent attributes make a full list.
const fullPack = ["01M8TEB9XW4JZFFFY611Y97H2F", "01M8TEB9XW4JZFFFY611Y97H2G"].map((id, i) =>
  ready(id, `{"n":${i}}`, { attributes: `{"specversion":"1.0","id":"o-${i}","source":"/shop","type":"order.created"}` }),
);
/** sendBatch with delaySeconds 3600. */
const delayed = ready("01M8TEB65FDVG0X4WHKG23C86X", '"d-single"', { dueAt: stoppedAt + hour });
/** Retried by a consumer with delaySeconds 7200 after its first delivery. */
const retried = ready("01M8TEB6B033H254H64A84GK3F", '"later"', { dueAt: stoppedAt + 2 * hour, deliveries: 1, leaseGeneration: 1 });
/** Held by an API lease of 60 s when the old celld stopped. */
const leased = ready("01M8TEB6GV0XSW3EHDKAPYT8SH", '"held"', { state: 1, dueAt: stoppedAt + minute, deliveries: 1, leaseGeneration: 1 });
/** In the queue's own dead-letter set after two deliveries. */
const dead = ready("01M8TEEFZZ57WFQMD9GHJ7XQE7", '{"n":"dead"}', { state: 2, dueAt: stoppedAt - minute, deliveries: 2, leaseGeneration: 2 });

const readyInOrder = [single, ...shortPack, ...fullPack];

interface OldFormat {
  commit: string;
  packs: boolean;
  userVersion: number;
}

const formats: OldFormat[] = [
  { commit: "c46ba4f", packs: false, userVersion: 0 },
  { commit: "10ce952", packs: true, userVersion: 0 },
  { commit: "4536557", packs: true, userVersion: 1 },
];

const bytesOf = (m: OldMessage) => Buffer.byteLength(m.body) + (m.attributes === null ? 0 : Buffer.byteLength(m.attributes));

/** Writes the queue file `path` as `format`'s celld left it. */
function writeOldFile(path: string, format: OldFormat, receipt?: { id: string; at: number }): void {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.exec(format.packs ? schemaWithPacks : schemaBeforePacks);
  const insert = db.prepare(
    `INSERT INTO messages (seq, id, state, due_at, deliveries, lease_generation, sent_at, enqueued_at, bytes, content_type, attributes, body)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  let seq = 1;
  const row = (m: OldMessage) =>
    insert.run(seq++, m.id, m.state, m.dueAt, m.deliveries, m.leaseGeneration, sentAt, sentAt, bytesOf(m), m.contentType, m.attributes, encoder.encode(m.body));
  const pack = (messages: OldMessage[], list: unknown) => {
    const first = messages[0]!;
    const bytes = messages.reduce((sum, m) => sum + bytesOf(m), 0);
    const body = Buffer.concat(messages.map((m) => Buffer.from(m.body)));
    const insertPack = db.prepare(
      `INSERT INTO messages (seq, id, state, due_at, sent_at, enqueued_at, bytes, content_type, n, last_id, pack, body)
       VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    insertPack.run(seq, first.id, first.dueAt, sentAt, sentAt, bytes, first.contentType, messages.length, messages.at(-1)!.id, JSON.stringify(list), body);
    seq += messages.length;
  };
  row(single);
  if (format.packs) {
    pack(shortPack, { first: shortPack[0]!.id, sentAt, contentType: "json", lengths: shortPack.map((m) => Buffer.byteLength(m.body)) });
    pack(
      fullPack,
      fullPack.map((m) => [m.id, sentAt, m.contentType, m.attributes, bytesOf(m), Buffer.byteLength(m.body)]),
    );
  } else {
    [...shortPack, ...fullPack].forEach(row);
  }
  [delayed, retried, leased, dead].forEach(row);
  if (receipt !== undefined) db.prepare("INSERT INTO received (id, at) VALUES (?, ?)").run(receipt.id, receipt.at);
  db.pragma(`user_version = ${format.userVersion}`);
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.close();
}

function userVersion(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.pragma("user_version", { simple: true }) as number;
  } finally {
    db.close();
  }
}

/** A harness whose clock stands where the old celld stopped, and the old file opened as "old". */
function openOld(format: OldFormat, receipt?: { id: string; at: number }) {
  const h = cellHarness();
  h.clock.advance(stoppedAt - h.clock.now());
  const path = join(h.dir, "old.sqlite");
  writeOldFile(path, format, receipt);
  const cell = h.open("old", { config: { maxDeliveries: 2 } });
  return { h, cell, path };
}

describe.each(formats)("a queue file written by $commit", (format) => {
  test("opens with every message, state, delay and count, and is marked with this format", async () => {
    const { h, cell, path } = openOld(format);
    expect(await cell.counts()).toMatchObject({ ready: readyInOrder.length, delayed: 2, leased: 1, dead: 1 });
    expect(userVersion(path)).toBe(cellFormatVersion);
    const got = await cell.lease({ max: 100 });
    expect(got.map((m) => m.id)).toEqual(readyInOrder.map((m) => m.id));
    expect(bodies(got)).toEqual(readyInOrder.map((m) => m.body));
    expect(got.map((m) => [m.deliveries, m.contentType, m.attributes, m.sentAt])).toEqual(
      readyInOrder.map((m) => [1, m.contentType, m.attributes, sentAt]),
    );
    // Acking part of a stored batch leaves the rest of it, which comes back alone.
    const keep = [got[2]!, got[6]!];
    const settled = await cell.settle({ acks: refs(got.filter((m) => !keep.includes(m))), nacks: refs(keep) });
    expect(settled).toMatchObject({ acked: got.length - 2, retried: 2, staleLeases: [] });
    const again = await cell.lease({ max: 100 });
    expect(again.map((m) => [m.id, m.deliveries])).toEqual(keep.map((m) => [m.id, 2]));
    await cell.ack(refs(again));
    await cell.close();
    await h.cell.close();
  });

  test("a lease held when the old celld stopped runs out at its time and the message comes back", async () => {
    const { h, cell } = openOld(format);
    await cell.ack(refs(await cell.lease({ max: 100 })));
    h.clock.advance(minute - 1);
    await settle();
    expect(await cell.counts()).toMatchObject({ leased: 1 });
    h.clock.advance(1);
    await settle();
    const [back] = await cell.lease({ max: 100 });
    expect(back).toMatchObject({ id: leased.id, deliveries: 2 });
    // A lease from before the upgrade is fenced: its generation no longer acks.
    expect((await cell.ack([{ id: leased.id, leaseGeneration: 1 }])).staleLeases).toHaveLength(1);
    await cell.close();
    await h.cell.close();
  });

  test("delays are still honoured, and a retried message dead-letters on its last delivery", async () => {
    const { h, cell } = openOld(format);
    await cell.ack(refs(await cell.lease({ max: 100 })));
    h.clock.advance(minute);
    await settle();
    await cell.ack(refs(await cell.lease({ max: 100 })));
    h.clock.advance(hour - minute - 1);
    expect(await cell.lease({ max: 100 })).toEqual([]);
    h.clock.advance(1);
    const [first] = await cell.lease({ max: 100 });
    expect(first).toMatchObject({ id: delayed.id, deliveries: 1 });
    await cell.ack(refs([first!]));
    h.clock.advance(hour);
    const [second] = await cell.lease({ max: 100 });
    expect(second).toMatchObject({ id: retried.id, deliveries: 2 });
    expect(await cell.nack(refs([second!]))).toMatchObject({ deadLettered: 1 });
    // The dead-letter set pages in seq order: the retried message was stored before the dead one.
    expect((await cell.listDead()).map((m) => [m.id, m.deliveries])).toEqual([
      [retried.id, 2],
      [dead.id, 2],
    ]);
    await cell.close();
    await h.cell.close();
  });

  test("its dead letters list and replay, and new sends go in after its messages", async () => {
    const { h, cell } = openOld(format);
    const [listed] = await cell.listDead();
    expect(listed).toMatchObject({ id: dead.id, deliveries: 2, deadAt: dead.dueAt, contentType: "json" });
    expect(decoder.decode(listed!.body)).toBe(dead.body);
    await cell.ack(refs(await cell.lease({ max: 100 })));
    expect(await cell.replay()).toEqual({ replayed: 1 });
    const sent = await cell.send([text("new-a"), text("new-b")]);
    const got = await cell.lease({ max: 100 });
    expect(got.map((m) => m.id)).toEqual([dead.id, ...sent.ids]);
    expect(bodies(got)).toEqual([dead.body, "new-a", "new-b"]);
    await cell.ack(refs(got));
    await cell.close();
    // Reopened as this format, the file holds what is left: the two delayed and the leased.
    const reopened = h.open("old");
    expect(await reopened.counts()).toMatchObject({ ready: 0, delayed: 2, leased: 1, dead: 0 });
    await reopened.close();
    await h.cell.close();
  });
});

describe("receipts of dead-letter moves written by 4536557 (before dec8b29 keyed them by entry time)", () => {
  // 4536557 kept, for each id a dead-letter queue took in, the time it took it in; this celld
  // keeps the time the message had entered the queue it came from, which is earlier.
  const id = "01M8TEEBK9AXWC3V9P2QFQSBQZ";

  function files(h: ReturnType<typeof cellHarness>, sourceEnteredAt: number, takenInAt: number): void {
    const target = new Database(join(h.dir, "dlq.sqlite"));
    target.exec(schemaWithPacks);
    target.prepare("INSERT INTO received (id, at) VALUES (?, ?)").run(id, takenInAt);
    target.pragma("user_version = 1");
    target.close();
    const source = new Database(join(h.dir, "src.sqlite"));
    source.exec(schemaWithPacks);
    source
      .prepare(
        `INSERT INTO messages (seq, id, state, due_at, deliveries, lease_generation, sent_at, enqueued_at, bytes, content_type, body)
         VALUES (1, ?, 3, ?, 2, 2, ?, ?, 4, 'text', ?)`,
      )
      .run(id, stoppedAt - minute, sourceEnteredAt, sourceEnteredAt, encoder.encode("once"));
    source.pragma("user_version = 1");
    source.close();
  }

  async function resumeMove(h: ReturnType<typeof cellHarness>) {
    const source = h.open("src", { config: { deadLetter: { kind: "queue", queue: "dlq" } } });
    await source.tick();
    await settle();
    const target = await h.other("dlq");
    const counts = { source: await source.counts(), target: await target.counts() };
    await source.close();
    await target.close();
    await h.cell.close();
    return counts;
  }

  test("a move the old celld's crash cut between its two steps is not taken in again once the target has acked it", async () => {
    const h = cellHarness();
    h.clock.advance(stoppedAt - h.clock.now());
    files(h, stoppedAt - 5 * minute, stoppedAt - minute);
    const { source, target } = await resumeMove(h);
    expect(source).toMatchObject({ movingToDeadLetterQueue: 0 });
    expect(target).toMatchObject({ ready: 0 });
  });

  test("the message come round again later (a chain made into a loop over time) is taken in", async () => {
    const h = cellHarness();
    h.clock.advance(stoppedAt - h.clock.now());
    files(h, stoppedAt - minute, stoppedAt - 5 * minute);
    const { source, target } = await resumeMove(h);
    expect(source).toMatchObject({ movingToDeadLetterQueue: 0 });
    expect(target).toMatchObject({ ready: 1 });
  });
});
