import Database from "better-sqlite3";
import { describe, expect, test } from "vitest";
import { insertRowsSql, limitedSql, schema, schemaAfterColumns, statementSql, type StatementName } from "../src/sqlite-sql.ts";

/**
 * How SQLite plans each statement of the store. A statement that stops using its index still
 * gives the right answer, only slowly (one did: acks walked every leased row, and the host fell
 * to 500 messages a second), so the plans are checked here rather than found in a benchmark.
 */

/** Walk the table in rowid order and stop at the first match, or run only at open or on a tick. */
const scansByDesign: Partial<Record<StatementName, string>> = {
  firstYoungerThan: "retention: expired rows are a prefix in seq order",
  oldestBacklog: "NOT INDEXED on purpose: the first backlog row in seq order",
  oldestEnqueued: "the first row by seq",
  newestEnqueued: "the last row by seq",
  nextSeq: "the last row by seq, once at open",
  packStats: "walks the packs' partial index, which holds packs only, once at open",
  totals: "counts per state, once at open",
  sweepReceived: "forgets old dead-letter receipts, on the retention tick",
  latestReceipt: "the receipts' latest time, once, at a file's first open by a celld that keeps entry times",
};
/** No table lookup at all. */
const noLookup: StatementName[] = [
  "insertIgnore",
  "insertPack",
  "insertUnpacked",
  "markReceived",
  "setMeta",
  "totalChanges",
  "pageCounts",
];

function plan(db: Database.Database, sql: string): string[] {
  const named = [...sql.matchAll(/@(\w+)/g)].map((m) => m[1]!);
  const args = named.length > 0 ? [Object.fromEntries(named.map((n) => [n, null]))] : Array.from(sql.match(/\?/g) ?? [], () => null);
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>).map((r) => r.detail);
}

describe("SQLite query plans", () => {
  const db = new Database(":memory:");
  db.exec(schema);
  db.exec(schemaAfterColumns);

  test.each(Object.keys(statementSql) as StatementName[])("%s uses an index, or scans by design", (name) => {
    const steps = plan(db, statementSql[name]);
    const scans = steps.filter((s) => /^SCAN (messages|m|received)\b(?! USING (COVERING )?INDEX)/.test(s));
    if (name in scansByDesign) return;
    if (noLookup.includes(name)) {
      expect(steps.filter((s) => /^(SCAN|SEARCH) (messages|m|received)\b/.test(s))).toEqual([]);
      return;
    }
    expect(scans, `${name}: ${steps.join(" | ")}`).toEqual([]);
    expect(steps.some((s) => /^SEARCH (messages|m|meta)\b/.test(s)), `${name}: ${steps.join(" | ")}`).toBe(true);
  });

  test("an ack looks each message up by id, from the JSON list outwards", () => {
    const steps = plan(db, statementSql.removeHeld);
    const list = steps.findIndex((s) => s.startsWith("SCAN j"));
    const byId = steps.findIndex((s) => /^SEARCH m USING INDEX sqlite_autoindex_messages_\d \(id=\?\)/.test(s));
    expect(list, steps.join(" | ")).toBeGreaterThanOrEqual(0);
    expect(byId, steps.join(" | ")).toBeGreaterThan(list);
  });

  test("a lease reads due ready rows through the state index and updates them by seq", () => {
    expect(plan(db, limitedSql.leasable(100))).toEqual([
      expect.stringMatching(/^CO-ROUTINE/),
      expect.stringMatching(/^SEARCH messages USING INDEX messages_by_state_due \(state=\? AND due_at<\?\)$/),
      expect.stringMatching(/^SCAN \(subquery/),
    ]);
    expect(plan(db, statementSql.leaseRows)[0]).toMatch(/^SEARCH messages USING INTEGER PRIMARY KEY \(rowid=\?\)/);
  });

  test("with packs, a lease finds the rows to take through the state index, then reads just those by seq", () => {
    expect(plan(db, limitedSql.leasablePlan(100))).toEqual([
      expect.stringMatching(/^CO-ROUTINE/),
      expect.stringMatching(/^SEARCH messages USING INDEX messages_by_state_due \(state=\? AND due_at<\?\)$/),
      expect.stringMatching(/^SCAN \(subquery/),
    ]);
    const fetch = plan(db, statementSql.leaseFetch);
    expect(fetch.some((s) => /^SEARCH messages USING INTEGER PRIMARY KEY \(rowid=\?\)/.test(s)), fetch.join(" | ")).toBe(true);
    expect(fetch.filter((s) => /^SCAN messages\b/.test(s)), fetch.join(" | ")).toEqual([]);
  });

  test("the pack that may hold an id is one step down the packs' index", () => {
    expect(plan(db, statementSql.packFor)).toEqual([expect.stringMatching(/^SEARCH messages USING INDEX messages_packs_by_id \(id<\?\)$/)]);
  });

  test("expired leases are read through the state index, oldest first, sorting nothing", () => {
    expect(plan(db, limitedSql.expiredLeases(100))).toEqual([
      expect.stringMatching(/^SEARCH messages USING INDEX messages_by_state_due \(state=\? AND due_at<\?\)$/),
    ]);
  });

  test("a dead host's leases are found through the state index, not by scanning the table", () => {
    expect(plan(db, limitedSql.leasedBy(1000))).toEqual([expect.stringMatching(/^SEARCH messages USING INDEX messages_by_state_due \(state=\?\)$/)]);
  });

  test("a LIMIT written into the SQL must be a positive integer", () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => limitedSql.leasable(bad)).toThrow(/LIMIT must be a positive integer/);
    }
  });

  test("a page of dead or moving rows walks its partial index in seq order, sorting nothing", () => {
    for (const [name, index] of [
      ["listDead", "messages_dead_by_seq"],
      ["listMoving", "messages_moving_by_seq"],
    ] as const) {
      const steps = plan(db, statementSql[name]);
      expect(steps, name).toEqual([expect.stringMatching(new RegExp(`^SEARCH messages USING INDEX ${index} \\(seq>\\?\\)`))]);
    }
  });

  test("a replay's slice of a dead-letter time range reads the state index in order, sorting nothing", () => {
    expect(plan(db, statementSql.deadInRange)).toEqual([
      expect.stringMatching(/^SEARCH messages USING INDEX messages_by_state_due \(state=\? AND due_at>\? AND due_at<\?\)$/),
    ]);
  });

  test("a send's multi-row INSERT reads no table", () => {
    expect(plan(db, insertRowsSql(3)).filter((s) => /messages/.test(s))).toEqual([]);
  });
});
