import { describe, expect, test } from "vitest";
import { MessageState, type CellStore, type LeasedRow, type NewMessage } from "../src/index.ts";
import { tempDir } from "./temp-dir.ts";

/**
 * What every storage backend must do. A backend's test file calls this with a factory that opens
 * (or reopens) its store for a directory; `reopen` must see everything committed before.
 */
export function describeStoreConformance(backend: string, openStore: (dir: string) => CellStore): void {
  const row = (id: string, extra: Partial<NewMessage> = {}): NewMessage => ({
    id,
    dueAt: 1_000,
    sentAt: 900,
    enqueuedAt: 1_000,
    contentType: "text",
    attributes: null,
    body: new TextEncoder().encode(id),
    ...extra,
  });
  /** What a first lease until `expiresAt` returns for `rows`, bodies as plain arrays. */
  const firstLeaseOf = (rows: readonly NewMessage[], expiresAt: number) =>
    rows.map((r) => ({
      ...r,
      body: [...r.body],
      seq: expect.any(Number),
      state: MessageState.leased,
      dueAt: expiresAt,
      leaseExpiresAt: expiresAt,
      availableAt: r.dueAt,
      deliveries: 1,
      leaseGeneration: 1,
      bytes: r.body.byteLength + new TextEncoder().encode(r.attributes ?? "").byteLength,
    }));
  const bodiesAsArrays = (leased: readonly LeasedRow[]) => leased.map((m) => ({ ...m, body: [...m.body] }));
  const fresh = (): { store: CellStore; dir: string } => {
    const dir = tempDir("celld-store-");
    return { store: openStore(dir), dir };
  };

  describe(`store conformance: ${backend}`, () => {
    test("insert keeps every field and counts ready rows and bytes", () => {
      const { store } = fresh();
      store.transaction(() => store.insert([row("a"), row("bb", { attributes: '{"k":1}' })]));
      expect(store.totals()).toEqual({ ready: 2, leased: 0, dead: 0, moving: 0, backlogBytes: 1 + 2 + 7 });
      const [a, b] = store.listByState(MessageState.ready, 0, 10);
      expect(a).toMatchObject({ id: "a", state: MessageState.ready, deliveries: 0, leaseGeneration: 0, sentAt: 900 });
      expect(b).toMatchObject({ id: "bb", attributes: '{"k":1}', bytes: 9 });
      expect(new TextDecoder().decode(b!.body)).toBe("bb");
      store.close();
    });

    test("lease takes due ready rows by visible time, bumping deliveries and generation", () => {
      const { store } = fresh();
      store.transaction(() => store.insert([row("late", { dueAt: 3_000 }), row("x", { dueAt: 2_000 }), row("y")]));
      const leased = store.transaction(() => store.lease(2_000, 1, 9_000));
      expect(leased.map((m) => m.id)).toEqual(["y"]);
      expect(leased[0]).toMatchObject({
        state: MessageState.leased,
        dueAt: 9_000,
        availableAt: 1_000,
        deliveries: 1,
        leaseGeneration: 1,
      });
      expect(store.transaction(() => store.lease(2_000, 10, 9_000)).map((m) => m.id)).toEqual(["x"]);
      expect(store.totals()).toMatchObject({ ready: 1, leased: 2 });
      store.close();
    });

    test("a lease returns every field and every body byte for byte: NULs, invalid UTF-8, empty", () => {
      const { store } = fresh();
      const bodies = [
        new Uint8Array([0, 0, 0]),
        new Uint8Array([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
        new Uint8Array(0),
        Uint8Array.from({ length: 70_000 }, (_, i) => (i * 7) % 256),
        new TextEncoder().encode('"héllo" 🚀'),
      ];
      const rows = bodies.map((body, i) =>
        row(`m${i}`, { body, dueAt: 1_000 + i, sentAt: 500 + i, enqueuedAt: 1_000 + i, contentType: i % 2 ? "bytes" : "v8", attributes: i === 1 ? '{"a":"b"}' : null }),
      );
      store.transaction(() => store.insert(rows));
      const leased = store.transaction(() => store.lease(5_000, 10, 9_000));
      expect(bodiesAsArrays(leased)).toEqual(firstLeaseOf(rows, 9_000));
      expect(store.transaction(() => store.lease(5_000, 10, 9_000))).toEqual([]);
      store.close();
    });

    test("a lease records its owner; leasedBy finds that owner's leased rows and no others", () => {
      const { store, dir } = fresh();
      store.transaction(() => store.insert([row("a"), row("b"), row("c"), row("d")]));
      store.transaction(() => store.lease(1_000, 2, 9_000, 7));
      store.transaction(() => store.lease(1_000, 1, 9_000));
      expect(store.leasedBy(7, 10).map((h) => h.id).sort()).toEqual(["a", "b"]);
      expect(store.leasedBy(7, 1)).toHaveLength(1);
      expect(store.leasedBy(8, 10)).toEqual([]);
      // A row that leaves the leased state is no longer anyone's.
      store.transaction(() => store.unlease(store.head("a")!, 1_000));
      store.close();
      const reopened = openStore(dir);
      expect(reopened.leasedBy(7, 10).map((h) => h.id)).toEqual(["b"]);
      reopened.close();
    });

    test("lease writes what it returns, and removeHeld takes only a row held with that generation", () => {
      const { store, dir } = fresh();
      store.transaction(() => store.insert([row("a"), row("b"), row("c"), row("d")]));
      store.transaction(() => store.lease(1_000, 3, 9_000));
      store.transaction(() => store.setState(store.head("c")!, MessageState.dead, 1_500));
      expect(store.head("a")).toMatchObject({ state: MessageState.leased, dueAt: 9_000, deliveries: 1, leaseGeneration: 1 });
      const removed = store.transaction(() =>
        store.removeHeld([
          { id: "a", leaseGeneration: 1 },
          { id: "a", leaseGeneration: 1 },
          { id: "b", leaseGeneration: 2 },
          { id: "c", leaseGeneration: 1 },
          { id: "d", leaseGeneration: 0 },
          { id: "nope", leaseGeneration: 1 },
        ]),
      );
      expect([...removed].sort()).toEqual([
        ["a", 1],
        ["d", 0],
      ]);
      expect(store.transaction(() => store.removeHeld([]))).toEqual(new Map());
      expect(store.totals()).toEqual({ ready: 0, leased: 1, dead: 1, moving: 0, backlogBytes: 1 });
      store.close();
      const reopened = openStore(dir);
      expect(reopened.totals()).toEqual({ ready: 0, leased: 1, dead: 1, moving: 0, backlogBytes: 1 });
      expect(reopened.head("b")).toMatchObject({ state: MessageState.leased, leaseGeneration: 1 });
      reopened.close();
    });

    test("state moves keep the totals right", () => {
      const { store } = fresh();
      store.transaction(() => store.insert([row("a"), row("b"), row("c")]));
      store.transaction(() => {
        store.setState(store.head("a")!, MessageState.dead, 5_000);
        store.setState(store.head("b")!, MessageState.moving, 5_000);
        store.remove(store.head("c")!);
      });
      expect(store.totals()).toEqual({ ready: 0, leased: 0, dead: 1, moving: 1, backlogBytes: 0 });
      store.transaction(() => store.resetToReady(store.head("a")!, 6_000));
      store.transaction(() => store.lease(6_000, 1, 8_000));
      store.transaction(() => store.unlease(store.head("a")!, 6_500));
      // Handing a lease back, like a replay, takes a new generation: the old holder is stale.
      expect(store.head("a")).toMatchObject({ state: MessageState.ready, dueAt: 6_500, deliveries: 0, leaseGeneration: 3 });
      store.transaction(() => store.setState(store.head("a")!, MessageState.ready, 6_000));
      expect(store.head("a")).toMatchObject({ state: MessageState.ready, dueAt: 6_000, deliveries: 0, leaseGeneration: 3 });
      expect(store.totals()).toMatchObject({ ready: 1, dead: 0, backlogBytes: 1 });
      store.close();
    });

    test("a transaction that throws writes nothing and leaves the totals as they were", () => {
      const { store } = fresh();
      store.transaction(() => store.insert([row("kept")]));
      expect(() =>
        store.transaction(() => {
          store.insert([row("lost")]);
          store.remove(store.head("kept")!);
          throw new Error("boom");
        }),
      ).toThrow("boom");
      expect(store.head("lost")).toBeUndefined();
      expect(store.head("kept")).toBeDefined();
      expect(store.totals()).toMatchObject({ ready: 1, backlogBytes: 4 });
      expect(store.oldestBacklogEnqueuedAt()).toBe(1_000);
      store.close();
    });

    test("expired leases, dead ranges and due times come from the index", () => {
      const { store } = fresh();
      store.transaction(() => store.insert([row("a"), row("b"), row("d1"), row("d2"), row("later", { dueAt: 7_000 })]));
      store.transaction(() => {
        store.lease(1_000, 2, 4_000);
        store.setState(store.head("d1")!, MessageState.dead, 100);
        store.setState(store.head("d2")!, MessageState.dead, 200);
      });
      expect(store.expiredLeases(3_999, 10)).toEqual([]);
      expect(store.expiredLeases(4_000, 10).map((h) => h.id)).toEqual(["a", "b"]);
      expect(store.deadInRange(100, 200, 10).map((h) => h.id)).toEqual(["d1"]);
      expect(store.deadInRange(0, 1_000, 10).map((h) => h.id)).toEqual(["d1", "d2"]);
      expect(store.dueTimes()).toEqual({ nextLeaseExpiryAt: 4_000, oldestEnqueuedAt: 1_000 });
      expect(store.countDelayed(1_000)).toBe(1);
      expect(store.earliestReadyDueAt()).toBe(7_000);
      expect(store.nextVisibleAt(1_000)).toBe(7_000);
      expect(store.nextVisibleAt(7_000)).toBeNull();
      store.close();
    });

    test("once nothing is delayed, every way a row becomes delayed shows in nextVisibleAt", () => {
      const { store } = fresh();
      store.transaction(() => store.insert([row("now"), row("held")]));
      expect(store.nextVisibleAt(1_000)).toBeNull();
      // A delayed send.
      store.transaction(() => store.insert([row("delayed", { dueAt: 5_000 })]));
      expect(store.nextVisibleAt(1_000)).toBe(5_000);
      expect(store.nextVisibleAt(5_000)).toBeNull();
      // A retry with a delay (a leased row back to ready), and a lease handed back for later.
      const [leased, other] = store.transaction(() => store.lease(5_000, 2, 60_000));
      store.transaction(() => store.setState(leased!, MessageState.ready, 8_000));
      expect(store.nextVisibleAt(5_000)).toBe(8_000);
      expect(store.nextVisibleAt(8_000)).toBeNull();
      store.transaction(() => store.unlease(other!, 9_000));
      expect(store.nextVisibleAt(8_000)).toBe(9_000);
      expect(store.nextVisibleAt(9_000)).toBeNull();
      // A replay of a dead row with a delay.
      store.transaction(() => store.setState(store.head("delayed")!, MessageState.dead, 9_000));
      store.transaction(() => store.resetToReady(store.head("delayed")!, 12_000));
      expect(store.nextVisibleAt(9_000)).toBe(12_000);
      expect(store.nextVisibleAt(12_000)).toBeNull();
      // A group that finds nothing delayed and then rolls back: the delayed row it removed is back.
      store.transaction(() => store.insert([row("later", { dueAt: 20_000 })]));
      expect(() =>
        store.transaction(() => {
          store.remove(store.head("later")!);
          expect(store.nextVisibleAt(12_000)).toBeNull();
          throw new Error("the group fails");
        }),
      ).toThrow("the group fails");
      expect(store.nextVisibleAt(12_000)).toBe(20_000);
      store.close();
    });

    test("a retention sweep given maxRows removes only the oldest that many expired rows", () => {
      const { store } = fresh();
      store.transaction(() =>
        store.insert([row("t1", { enqueuedAt: 1 }), row("t2", { enqueuedAt: 2 }), row("t3", { enqueuedAt: 3 }), row("t4", { enqueuedAt: 9 })]),
      );
      expect(store.transaction(() => store.sweepEnqueuedBefore(3, 2))).toBe(2);
      expect(store.listByState(MessageState.ready, 0, 10).map((m) => m.id)).toEqual(["t3", "t4"]);
      expect(store.transaction(() => store.sweepEnqueuedBefore(3, 2))).toBe(1);
      expect(store.transaction(() => store.sweepEnqueuedBefore(3, 2))).toBe(0);
      expect(store.listByState(MessageState.ready, 0, 10).map((m) => m.id)).toEqual(["t4"]);
      store.close();
    });

    test("the retention sweep removes exactly the rows that entered at or before the cutoff", () => {
      const { store } = fresh();
      store.transaction(() =>
        store.insert([row("t1", { enqueuedAt: 1 }), row("t2", { enqueuedAt: 2 }), row("t3", { enqueuedAt: 3 })]),
      );
      store.transaction(() => store.setState(store.head("t1")!, MessageState.dead, 5));
      expect(store.transaction(() => store.sweepEnqueuedBefore(2))).toBe(2);
      expect(store.listByState(MessageState.ready, 0, 10).map((m) => m.id)).toEqual(["t3"]);
      expect(store.totals()).toEqual({ ready: 1, leased: 0, dead: 0, moving: 0, backlogBytes: 2 });
      expect(store.oldestBacklogEnqueuedAt()).toBe(3);
      expect(store.newestEnqueuedAt()).toBe(3);
      store.close();
    });

    test("skipKnownIds takes an id once from each entry into the queue it comes from, even after it was removed", () => {
      const { store } = fresh();
      const moved = (from: number) => row("m", { movedFromEnqueuedAt: from });
      expect(store.transaction(() => store.insert([moved(5)], { skipKnownIds: true }))).toEqual(["m"]);
      // The same move again (repeated after a crash): present, and then removed.
      expect(store.transaction(() => store.insert([moved(5)], { skipKnownIds: true }))).toEqual([]);
      store.transaction(() => store.remove(store.head("m")!));
      expect(store.transaction(() => store.insert([moved(5)], { skipKnownIds: true }))).toEqual([]);
      // The message come round a dead-letter loop: a later entry into its source.
      expect(store.transaction(() => store.insert([moved(9)], { skipKnownIds: true }))).toEqual(["m"]);
      expect(store.transaction(() => store.insert([moved(9)], { skipKnownIds: true }))).toEqual([]);
      store.transaction(() => store.remove(store.head("m")!));
      expect(store.transaction(() => store.sweepReceivedBefore(8))).toBe(0);
      expect(store.transaction(() => store.sweepReceivedBefore(1_000))).toBe(1);
      expect(store.transaction(() => store.insert([moved(9)], { skipKnownIds: true }))).toEqual(["m"]);
      store.close();
    });

    test("a purge given a slice removes at most its rows, none above its seq, and seqHighWater bounds every row", () => {
      const { store } = fresh();
      for (const id of ["a", "b", "c"]) store.transaction(() => store.insert([row(id)]));
      const high = store.seqHighWater();
      store.transaction(() => store.insert([row("d")]));
      expect(store.seqHighWater()).toBeGreaterThan(high);
      expect(store.transaction(() => store.purge([MessageState.ready], { rows: 2, seqAtMost: high }))).toBe(2);
      expect(store.transaction(() => store.purge([MessageState.ready], { rows: 2, seqAtMost: high }))).toBe(1);
      expect(store.transaction(() => store.purge([MessageState.ready], { rows: 2, seqAtMost: high }))).toBe(0);
      expect(store.listByState(MessageState.ready, 0, 10).map((m) => m.id)).toEqual(["d"]);
      store.close();
    });

    test("purge removes the named states only", () => {
      const { store } = fresh();
      store.transaction(() => store.insert([row("a"), row("b")]));
      store.transaction(() => store.setState(store.head("a")!, MessageState.dead, 1));
      expect(store.transaction(() => store.purge([MessageState.dead]))).toBe(1);
      expect(store.totals()).toMatchObject({ ready: 1, dead: 0 });
      store.close();
    });

    // A send of several messages due together may be kept together (SQLite keeps it as one row);
    // each of its messages must still behave as one of its own.
    describe("the messages of one send", () => {
      const send = (ids: string[], extra: Partial<NewMessage> = {}): NewMessage[] => ids.map((id) => row(id, extra));
      const ids = (list: ReadonlyArray<{ id: string }>): string[] => list.map((m) => m.id);

      test("each comes back whole from a lease, bodies and attributes byte for byte", () => {
        const { store } = fresh();
        const bodies = [new Uint8Array(0), new Uint8Array([0, 0xff, 0]), Uint8Array.from({ length: 70_000 }, (_, i) => i % 251)];
        const rows = bodies.map((body, i) => row(`m${i}`, { body, sentAt: 500 + i, contentType: i === 1 ? "v8" : "bytes", attributes: i === 2 ? '{"a":1}' : null }));
        store.transaction(() => store.insert(rows));
        expect(store.totals()).toEqual({ ready: 3, leased: 0, dead: 0, moving: 0, backlogBytes: 3 + 70_000 + 7 });
        const leased = store.transaction(() => store.lease(1_000, 10, 9_000, 4));
        expect(bodiesAsArrays(leased)).toEqual(firstLeaseOf(rows, 9_000));
        expect(new Set(leased.map((m) => m.seq)).size).toBe(3);
        expect(store.listByState(MessageState.leased, 0, 10).map((m) => [m.id, [...m.body].length])).toEqual([
          ["m0", 0],
          ["m1", 3],
          ["m2", 70_000],
        ]);
        store.close();
      });

      test("a lease takes as many as it may, oldest first, and the rest stay due", () => {
        const { store } = fresh();
        store.transaction(() => store.insert(send(["a", "b", "c", "d", "e"])));
        store.transaction(() => store.insert(send(["f", "g"])));
        expect(store.hasDue(1_000, 7)).toBe(true);
        expect(store.hasDue(1_000, 8)).toBe(false);
        expect([store.dueCount(1_000, 3), store.dueCount(1_000, 6), store.dueCount(1_000, 100)]).toEqual([3, 6, 7]);
        expect(ids(store.transaction(() => store.lease(1_000, 2, 9_000)))).toEqual(["a", "b"]);
        expect(ids(store.transaction(() => store.lease(1_000, 4, 9_000)))).toEqual(["c", "d", "e", "f"]);
        expect(store.totals()).toMatchObject({ ready: 1, leased: 6 });
        expect(store.head("d")).toMatchObject({ id: "d", state: MessageState.leased, deliveries: 1, leaseGeneration: 1, bytes: 1 });
        expect(ids(store.transaction(() => store.lease(1_000, 9, 9_000)))).toEqual(["g"]);
        store.close();
      });

      test("acks take all of a send, part of it, or across sends; stale and repeated refs take nothing", () => {
        const { store } = fresh();
        store.transaction(() => store.insert(send(["a", "b", "c"])));
        store.transaction(() => store.insert(send(["d", "e", "f"])));
        store.transaction(() => store.insert([row("g")]));
        store.transaction(() => store.lease(1_000, 10, 9_000));
        const refs = (list: string[], generation = 1) => list.map((id) => ({ id, leaseGeneration: generation }));
        const all = store.transaction(() => store.removeHeld([...refs(["a", "b", "c", "a"]), ...refs(["e"]), ...refs(["f"], 2), ...refs(["g", "zz"])]));
        expect([...all].sort()).toEqual([
          ["a", 1],
          ["b", 1],
          ["c", 1],
          ["e", 1],
          ["g", 1],
        ]);
        expect(store.head("b")).toBeUndefined();
        expect(store.head("d")).toMatchObject({ state: MessageState.leased, leaseGeneration: 1 });
        expect(store.head("f")).toMatchObject({ state: MessageState.leased, leaseGeneration: 1 });
        expect(store.totals()).toEqual({ ready: 0, leased: 2, dead: 0, moving: 0, backlogBytes: 2 });
        expect([...store.transaction(() => store.removeHeld(refs(["d", "f"])))].sort()).toEqual([
          ["d", 1],
          ["f", 1],
        ]);
        expect(store.totals()).toEqual({ ready: 0, leased: 0, dead: 0, moving: 0, backlogBytes: 0 });
        store.close();
      });

      test("each is retried, dead-lettered, expired, handed back and removed on its own", () => {
        const { store, dir } = fresh();
        store.transaction(() => store.insert(send(["a", "b", "c", "d", "e"])));
        store.transaction(() => store.lease(1_000, 5, 4_000, 6));
        expect(ids(store.leasedBy(6, 10))).toEqual(["a", "b", "c", "d", "e"]);
        expect(ids(store.leasedBy(6, 2))).toHaveLength(2);
        expect(ids(store.expiredLeases(4_000, 2))).toEqual(["a", "b"]);
        store.transaction(() => {
          store.setState(store.head("b")!, MessageState.ready, 5_000);
          store.setState(store.head("c")!, MessageState.dead, 4_000);
          store.unlease(store.head("d")!, 4_000);
          store.remove(store.head("e")!);
        });
        expect(store.head("a")).toMatchObject({ state: MessageState.leased, dueAt: 4_000, leaseGeneration: 1 });
        expect(store.head("b")).toMatchObject({ state: MessageState.ready, dueAt: 5_000, deliveries: 1, leaseGeneration: 1 });
        expect(store.head("c")).toMatchObject({ state: MessageState.dead, dueAt: 4_000 });
        expect(store.head("d")).toMatchObject({ state: MessageState.ready, deliveries: 0, leaseGeneration: 2 });
        expect(store.head("e")).toBeUndefined();
        expect(store.totals()).toEqual({ ready: 2, leased: 1, dead: 1, moving: 0, backlogBytes: 3 });
        expect(ids(store.deadInRange(0, 10_000, 10))).toEqual(["c"]);
        store.transaction(() => store.resetToReady(store.head("c")!, 4_500));
        store.close();
        const again = openStore(dir);
        expect(again.totals()).toEqual({ ready: 3, leased: 1, dead: 0, moving: 0, backlogBytes: 4 });
        expect(ids(again.transaction(() => again.lease(6_000, 10, 9_000)))).toEqual(["b", "c", "d"]);
        again.close();
      });

      test("pages by seq run through a send's messages", () => {
        const { store } = fresh();
        store.transaction(() => store.insert([row("a")]));
        store.transaction(() => store.insert(send(["b", "c", "d", "e"])));
        store.transaction(() => store.insert([row("f")]));
        const pages: string[][] = [];
        let after = 0;
        for (;;) {
          const page = store.listByState(MessageState.ready, after, 2);
          if (page.length === 0) break;
          pages.push(ids(page));
          after = page[page.length - 1]!.seq;
        }
        expect(pages).toEqual([
          ["a", "b"],
          ["c", "d"],
          ["e", "f"],
        ]);
        store.close();
      });

      test("retention and purge count each message", () => {
        const { store } = fresh();
        store.transaction(() => store.insert(send(["a", "b", "c"], { enqueuedAt: 1, dueAt: 1 })));
        store.transaction(() => store.insert(send(["d", "e"], { enqueuedAt: 2, dueAt: 2 })));
        store.transaction(() => store.insert(send(["f", "g"], { enqueuedAt: 3, dueAt: 3 })));
        expect(store.countDelayed(0)).toBe(7);
        expect(store.transaction(() => store.sweepEnqueuedBefore(1))).toBe(3);
        expect(store.oldestBacklogEnqueuedAt()).toBe(2);
        expect(store.transaction(() => store.purge([MessageState.ready]))).toBe(4);
        expect(store.totals()).toEqual({ ready: 0, leased: 0, dead: 0, moving: 0, backlogBytes: 0 });
        store.close();
      });

      test("a send rolled back leaves nothing, and sends after a reopen never share a seq", () => {
        const { store, dir } = fresh();
        expect(() =>
          store.transaction(() => {
            store.insert(send(["a", "b"]));
            throw new Error("the group fails");
          }),
        ).toThrow("the group fails");
        expect(store.head("a")).toBeUndefined();
        expect(store.head("b")).toBeUndefined();
        expect(store.totals().ready).toBe(0);
        store.transaction(() => store.insert(send(["c", "d", "e"])));
        store.close();
        const again = openStore(dir);
        again.transaction(() => again.insert(send(["f", "g"])));
        again.transaction(() => again.insert([row("h")]));
        const leased = again.transaction(() => again.lease(1_000, 10, 9_000));
        expect(ids(leased)).toEqual(["c", "d", "e", "f", "g", "h"]);
        expect(new Set(leased.map((m) => m.seq)).size).toBe(6);
        again.close();
      });
    });

    test("everything committed is there after reopening: rows, generations, totals, meta", () => {
      const { store, dir } = fresh();
      store.transaction(() => {
        store.insert([row("a"), row("b")]);
        store.setMeta("config", "{}");
      });
      store.transaction(() => store.lease(1_000, 1, 5_000));
      const totals = store.totals();
      store.close();
      const again = openStore(dir);
      expect(again.totals()).toEqual(totals);
      expect(again.head("a")).toMatchObject({ state: MessageState.leased, leaseGeneration: 1, deliveries: 1 });
      expect(again.getMeta("config")).toBe("{}");
      again.close();
    });
  });
}
