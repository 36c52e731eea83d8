import { describe, expect, test } from "vitest";
import { BackgroundWorkError, QueueCell, limits } from "../src/index.ts";
import { ObservedStore, bodies, cellHarness, refs, settle, sqliteStore, text } from "./cell-harness.ts";

const dayMs = 86_400_000;

describe("dead-lettering", () => {
  test("after max deliveries, a nacked message goes to the queue's own dead-letter set", async () => {
    const h = cellHarness({ config: { maxDeliveries: 2 } });
    await h.cell.send([text("poison")]);
    const [one] = await h.cell.lease({ max: 1 });
    expect(await h.cell.nack(refs([one!]))).toMatchObject({ retried: 1, deadLettered: 0 });
    const [two] = await h.cell.lease({ max: 1 });
    expect(two).toMatchObject({ deliveries: 2 });
    expect(await h.cell.nack(refs([two!]))).toMatchObject({ retried: 0, deadLettered: 1 });
    expect(await h.cell.lease({ max: 1 })).toEqual([]);
    expect(await h.cell.counts()).toMatchObject({ ready: 0, leased: 0, dead: 1, backlogBytes: 0 });
    const [dead] = await h.cell.listDead();
    expect(dead).toMatchObject({ id: one!.id, deliveries: 2, deadAt: h.clock.now(), contentType: "text" });
    await h.cell.close();
  });

  test("an expired lease on the last delivery dead-letters the message", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1 } });
    await h.cell.send([text("slow")]);
    await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 10 });
    h.clock.advance(10_000);
    await settle();
    expect(await h.cell.counts()).toMatchObject({ leased: 0, dead: 1 });
    await h.cell.close();
  });

  test("deliveries never exceed max deliveries, and a message is dead-lettered once", async () => {
    const h = cellHarness({ config: { maxDeliveries: 3 } });
    await h.cell.send([text("m")]);
    let deliveries = 0;
    for (let i = 0; i < 10; i++) {
      const leased = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 1 });
      deliveries += leased.length;
      h.clock.advance(1_000);
    }
    expect(deliveries).toBe(3);
    expect((await h.cell.counts()).dead).toBe(1);
    await h.cell.close();
  });

  test("with the delete policy, the message is removed (a Worker consumer without a dead-letter queue)", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1, deadLetter: { kind: "delete" } } });
    await h.cell.send([text("gone")]);
    const leased = await h.cell.lease({ max: 1 });
    expect(await h.cell.nack(refs(leased))).toMatchObject({ deadLettered: 1 });
    expect(await h.cell.counts()).toMatchObject({ ready: 0, leased: 0, dead: 0 });
    await h.cell.close();
  });

  test("into another queue: same id, body and sent time, a fresh delivery count", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1, deadLetter: { kind: "queue", queue: "dlq" } } });
    const sentAt = h.clock.now();
    const [id] = (await h.cell.send([{ ...text("to dlq"), attributes: "{}" }])).ids;
    h.clock.advance(1_000);
    const leased = await h.cell.lease({ max: 1 });
    await h.cell.nack(refs(leased));
    await settle();
    const dlq = await h.other("dlq");
    const [moved] = await dlq.lease({ max: 1 });
    expect(moved).toMatchObject({ id, sentAt, deliveries: 1, contentType: "text", attributes: "{}" });
    expect(bodies([moved!])).toEqual(["to dlq"]);
    expect(await h.cell.counts()).toMatchObject({ dead: 0, movingToDeadLetterQueue: 0 });
    await h.cell.close();
    await dlq.close();
  });

  test("a move repeated after a crash between its two steps neither loses nor duplicates", async () => {
    const h = cellHarness();
    const dlq = await h.other("dlq");
    await h.cell.send([text("once")]);
    const [m] = await h.cell.lease({ max: 1 });
    const row = { ...m!, seq: 1, state: 3 as const, dueAt: 0, bytes: 4, attributes: null };
    // The target committed, the source did not delete: the move runs again.
    expect(await dlq.receiveDeadLetters([row])).toBe(1);
    expect(await dlq.receiveDeadLetters([row])).toBe(0);
    const [leased] = await dlq.lease({ max: 10 });
    await dlq.ack(refs([leased!]));
    // Even after the target acked it, a third attempt does not bring it back.
    expect(await dlq.receiveDeadLetters([row])).toBe(0);
    expect(await dlq.counts()).toMatchObject({ ready: 0, leased: 0 });
    await h.cell.close();
    await dlq.close();
  });

  test("a message that comes round a dead-letter loop made over time is taken in again, not skipped as a repeat", async () => {
    // q's dead letters go to dlq; later dlq's go back to q (a loop no one config had, so none
    // refused it); the message fails in q once more and must reach dlq again.
    const toDlq = { config: { maxDeliveries: 1, deadLetter: { kind: "queue" as const, queue: "dlq" } } };
    const h = cellHarness(toDlq);
    const [id] = (await h.cell.send([text("round")])).ids;
    await h.cell.nack(refs(await h.cell.lease({ max: 1 })));
    await settle();
    const dlq = await h.other("dlq");
    await dlq.configure({ maxDeliveries: 1, deadLetter: { kind: "queue", queue: "q" } });
    h.clock.advance(1_000);
    await dlq.nack(refs(await dlq.lease({ max: 1 })));
    await settle();
    h.clock.advance(1_000);
    const back = await h.cell.lease({ max: 1 });
    expect(back.map((m) => m.id)).toEqual([id]);
    await h.cell.nack(refs(back));
    await settle();
    expect(await h.cell.counts()).toMatchObject({ ready: 0, dead: 0, movingToDeadLetterQueue: 0 });
    const again = await dlq.lease({ max: 1 });
    expect(again.map((m) => [m.id, bodies([m])[0]])).toEqual([[id, "round"]]);
    await h.cell.close();
    await dlq.close();
  });

  test("a move interrupted by closing resumes when the cell opens again", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1, deadLetter: { kind: "queue", queue: "dlq" } } });
    await h.cell.send([text("a"), text("b")]);
    const leased = await h.cell.lease({ max: 2 });
    // Close right after the nack commits, before the mover's first step can run.
    const nacked = h.cell.nack(refs(leased));
    await nacked;
    await h.cell.close();
    const reopened = h.open("q", { config: { maxDeliveries: 1, deadLetter: { kind: "queue", queue: "dlq" } } });
    await settle();
    await settle();
    const dlq = await h.other("dlq");
    expect(bodies(await dlq.lease({ max: 10 })).sort()).toEqual(["a", "b"]);
    expect(await reopened.counts()).toMatchObject({ movingToDeadLetterQueue: 0 });
    await reopened.close();
    await dlq.close();
  });

  test("a move whose target closed under it is taken up again a second later, and is no error", async () => {
    const errors: unknown[] = [];
    const targets: QueueCell[] = [];
    const h = cellHarness({
      config: { maxDeliveries: 1, deadLetter: { kind: "queue", queue: "dlq" } },
      onBackgroundError: (error) => errors.push(error),
      // The first lookup finds the target as it closed (idle, or the host stopping); the next, open.
      resolveCell: async () => targets.shift()!,
    });
    const closedTarget = h.open("dlq");
    await closedTarget.close();
    const target = h.open("dlq");
    targets.push(closedTarget, target);
    await h.cell.send([text("a")]);
    await h.cell.nack(refs(await h.cell.lease({ max: 1 })));
    await settle();
    expect(await h.cell.counts()).toMatchObject({ movingToDeadLetterQueue: 1 });
    h.clock.advance(1_000);
    await settle();
    expect(bodies(await target.lease({ max: 1 }))).toEqual(["a"]);
    expect(await h.cell.counts()).toMatchObject({ movingToDeadLetterQueue: 0 });
    expect(errors).toEqual([]);
    await h.cell.close();
    await target.close();
  });

  test("a move failing on a full disk is named in each report and tried again after 1 s, doubling to 30 s; after a move works, from 1 s again", async () => {
    const reports: Array<{ atMs: number; error: unknown }> = [];
    let target: QueueCell | undefined;
    const h = cellHarness({
      config: { maxDeliveries: 1, deadLetter: { kind: "queue", queue: "dlq" } },
      onBackgroundError: (error) => reports.push({ atMs: h.clock.now(), error }),
      resolveCell: async () => target!,
    });
    // The target's disk fills up, as far as its store is concerned.
    const full = new ObservedStore(sqliteStore(h.dir, "dlq"));
    target = new QueueCell({ name: "dlq", store: full.wrap(), clock: h.clock });
    const start = h.clock.now();
    const deadLetter = async (body: string): Promise<void> => {
      await h.cell.send([text(body)]);
      await h.cell.nack(refs(await h.cell.lease({ max: 1 })));
      await settle();
    };
    full.diskFull = true;
    await deadLetter("a");
    // Each wait runs out to the millisecond, and not one before.
    const waits = [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000];
    for (const wait of waits) {
      h.clock.advance(wait - 1);
      await settle();
      const before = reports.length;
      h.clock.advance(1);
      await settle();
      expect(reports).toHaveLength(before + 1);
    }
    // A dead letter arriving meanwhile waits for the retry too, rather than starting a move of its own.
    await deadLetter("b");
    expect(reports).toHaveLength(waits.length + 1);
    const attempts = reports.map((r) => r.atMs - start);
    expect(attempts).toEqual([0, 1000, 3000, 7000, 15_000, 31_000, 61_000, 91_000]);
    const error = reports[1]!.error;
    expect(error).toBeInstanceOf(BackgroundWorkError);
    expect((error as Error).message).toBe(
      'queue "q": moving dead letters to "dlq" failed, tried again in 2 s: the storage of queue "dlq" failed (SQLITE_FULL: database or disk is full)',
    );
    expect(reports.map((r) => (r.error as Error).message.match(/tried again in (\d+) s/)![1])).toEqual(["1", "2", "4", "8", "16", "30", "30", "30"]);

    // Space again: the next attempt moves both, and the wait starts over at 1 s.
    full.diskFull = false;
    h.clock.advance(30_000);
    await settle();
    expect(await h.cell.counts()).toMatchObject({ movingToDeadLetterQueue: 0 });
    expect(bodies(await target.lease({ max: 10 }))).toEqual(["a", "b"]);
    full.diskFull = true;
    await deadLetter("c");
    h.clock.advance(1000);
    await settle();
    expect(reports.slice(-2).map((r) => r.atMs - reports.at(-2)!.atMs)).toEqual([0, 1000]);
    full.diskFull = false;
    await h.cell.close();
    await target.close();
  });

  test("a queue cannot be its own dead-letter queue", () => {
    const h = cellHarness();
    expect(() => h.open("self", { config: { deadLetter: { kind: "queue", queue: "self" } } })).toThrow(
      /cannot be its own dead-letter queue/,
    );
  });
});

describe("replay", () => {
  async function deadAt(h: ReturnType<typeof cellHarness>, label: string): Promise<void> {
    await h.cell.send([text(label)]);
    const leased = await h.cell.lease({ max: 1 });
    await h.cell.nack(refs(leased));
  }

  test("returns every dead message to ready with a fresh delivery count and the same id", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1 } });
    await deadAt(h, "a");
    await deadAt(h, "b");
    const [deadA] = await h.cell.listDead();
    expect(await h.cell.replay()).toEqual({ replayed: 2 });
    const leased = await h.cell.lease({ max: 10 });
    expect(bodies(leased)).toEqual(["a", "b"]);
    expect(leased[0]).toMatchObject({ id: deadA!.id, deliveries: 1 });
    await h.cell.close();
  });

  test("a lease from before the dead-lettering cannot ack the replayed message", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1 } });
    await h.cell.send([text("m")]);
    const [old] = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 1 });
    h.clock.advance(1_000);
    await settle();
    expect((await h.cell.counts()).dead).toBe(1);
    await h.cell.replay();
    expect(await h.cell.ack(refs([old!]))).toMatchObject({ acked: 0, staleLeases: refs([old!]) });
    expect((await h.cell.counts()).ready).toBe(1);
    await h.cell.close();
  });

  test("replays only those dead-lettered in [from, to)", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1 } });
    const t0 = h.clock.now();
    await deadAt(h, "t0");
    h.clock.advance(60_000);
    await deadAt(h, "t60");
    h.clock.advance(60_000);
    await deadAt(h, "t120");
    expect(await h.cell.replay({ fromMs: t0 + 60_000, toMs: t0 + 120_000 })).toEqual({ replayed: 1 });
    expect(bodies(await h.cell.lease({ max: 10 }))).toEqual(["t60"]);
    expect((await h.cell.counts()).dead).toBe(2);
    await h.cell.close();
  });
});

describe("purge and counts", () => {
  /** 12,000 messages in their own rows, sent 250 at a time; dead ones if `dead`. */
  async function largeSet(cell: QueueCell, dead: boolean): Promise<void> {
    for (let i = 0; i < 12_000; i += 250) {
      await Promise.all(Array.from({ length: 250 }, (_, j) => cell.send([text(`m-${i + j}`)])));
    }
    if (!dead) return;
    for (let leased = await cell.lease({ max: 100 }); leased.length > 0; leased = await cell.lease({ max: 100 })) {
      await cell.nack(refs(leased));
    }
  }

  for (const [operation, dead] of [["purge", false], ["replay", true]] as const) {
    test(`a ${operation} of a large set goes a slice a group, so other calls run before it ends (done whole, 300,000 held the event loop 0.9-1.9 s)`, async () => {
      const h = cellHarness({ config: { maxDeliveries: 1 } });
      const observed = new ObservedStore(sqliteStore(h.dir));
      const cell = new QueueCell({ name: "big", store: observed.wrap(), clock: h.clock, config: { maxDeliveries: 1 } });
      await largeSet(cell, dead);
      const before = observed.transactions;
      let ended = false;
      const running = (operation === "purge" ? cell.purge("all") : cell.replay()).then((result) => {
        ended = true;
        return result;
      });
      await new Promise((resolve) => setImmediate(resolve));
      await cell.send([text("after")]);
      expect(ended).toBe(false);
      expect(await running).toEqual(operation === "purge" ? { purged: 12_000 } : { replayed: 12_000 });
      expect(observed.transactions - before).toBeGreaterThanOrEqual(3);
      // What was sent after the call began is not its: a purge leaves it.
      expect((await cell.counts()).ready).toBe(operation === "purge" ? 1 : 12_001);
      await cell.close();
    });
  }

  test("purge dead leaves the backlog; purge all empties the queue", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1 } });
    await h.cell.send([text("dead")]);
    await h.cell.nack(refs(await h.cell.lease({ max: 1 })));
    await h.cell.send([text("ready"), text("delayed", { delaySeconds: 60 })]);
    expect(await h.cell.purge("dead")).toEqual({ purged: 1 });
    expect(await h.cell.counts()).toMatchObject({ ready: 1, delayed: 1, dead: 0, backlogBytes: 12 });
    expect(await h.cell.purge("all")).toEqual({ purged: 2 });
    expect(await h.cell.counts()).toEqual({
      ready: 0,
      delayed: 0,
      leased: 0,
      dead: 0,
      movingToDeadLetterQueue: 0,
      backlogBytes: 0,
      oldestMessageAt: null,
    });
    await h.cell.close();
  });

  test("counts are rebuilt exactly after reopening", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1 } });
    const t0 = h.clock.now();
    await h.cell.send([text("1"), text("22"), text("333", { delaySeconds: 9 })]);
    await h.cell.lease({ max: 1 });
    const before = await h.cell.counts();
    expect(before).toEqual({
      ready: 1,
      delayed: 1,
      leased: 1,
      dead: 0,
      movingToDeadLetterQueue: 0,
      backlogBytes: 6,
      oldestMessageAt: t0,
    });
    await h.cell.close();
    const reopened = h.open("q");
    expect(await reopened.counts()).toEqual(before);
    await reopened.close();
  });
});

describe("retention", () => {
  test(`every message leaves ${limits.retentionSeconds / 86_400} days after it entered, in every state, and is told of`, async () => {
    const warnings: string[] = [];
    const h = cellHarness({ config: { maxDeliveries: 1 }, onWarning: (line) => warnings.push(line) });
    await h.cell.send([text("dead")]);
    await h.cell.nack(refs(await h.cell.lease({ max: 1 })));
    await h.cell.send([text("leased")]);
    await h.cell.lease({ max: 1, visibilityTimeoutSeconds: limits.visibilityTimeoutSecondsMax });
    await h.cell.send([text("ready"), text("delayed", { delaySeconds: limits.delaySecondsMax })]);
    h.clock.advance(dayMs);
    await h.cell.send([text("younger")]);
    h.clock.advance(limits.retentionSeconds * 1000 - dayMs);
    await settle();
    const counts = await h.cell.counts();
    expect(counts).toMatchObject({ ready: 1, delayed: 0, leased: 0, dead: 0 });
    expect(bodies(await h.cell.lease({ max: 10 }))).toEqual(["younger"]);
    const told = (n: string) =>
      `queue "q": ${n} reached the 4-day retention before being acknowledged and were deleted ` +
      "(dead letters kept in the queue's own set included)";
    expect(warnings).toEqual([told("4 messages")]);
    h.clock.advance(dayMs);
    await settle();
    expect((await h.cell.counts()).leased).toBe(0);
    expect(warnings).toEqual([told("4 messages"), told("1 message")]);
    await h.cell.close();
  });

  test("a large expired backlog is swept a slice at a time, each in a group of its own, none of it delivered meanwhile, and told once", async () => {
    const warnings: string[] = [];
    const h = cellHarness({ onWarning: (line) => warnings.push(line) });
    const expired = 12_000;
    for (let i = 0; i < expired; i += 250) {
      await Promise.all(Array.from({ length: 250 }, (_, j) => h.cell.send([text(`old-${i + j}`)])));
    }
    h.clock.advance(limits.retentionSeconds * 1000 - 1_000);
    await h.cell.send([text("fresh")]);
    h.clock.advance(2_000);
    // One group deletes a slice, not the whole backlog: 300,000 rows at once held the event loop 1.7 s.
    expect(await h.cell.lease({ max: 10 })).toEqual([]);
    const first = await h.cell.counts();
    expect(first.ready).toBeGreaterThan(1);
    expect(first.ready).toBeLessThan(expired);
    // The timer takes up the rest at once; a waiting lease gets the fresh message, and nothing older.
    const waiting = h.cell.lease({ max: 10, waitSeconds: 20 });
    for (let i = 0; i < 20; i++) {
      h.clock.advance(1);
      await settle();
    }
    expect(bodies(await waiting)).toEqual(["fresh"]);
    expect(await h.cell.counts()).toMatchObject({ ready: 0, leased: 1 });
    expect(warnings).toEqual([expect.stringMatching(/^queue "q": 12000 messages reached the 4-day retention/)]);
    await h.cell.close();
  });

  test("a message moved into a dead-letter queue is retained from when it entered that queue", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1, deadLetter: { kind: "queue", queue: "dlq" } } });
    await h.cell.send([text("m")]);
    h.clock.advance(3 * dayMs);
    await h.cell.nack(refs(await h.cell.lease({ max: 1 })));
    await settle();
    const dlq = await h.other("dlq");
    h.clock.advance(2 * dayMs);
    await settle();
    expect((await dlq.counts()).ready).toBe(1);
    h.clock.advance(2 * dayMs);
    await settle();
    expect((await dlq.counts()).ready).toBe(0);
    await h.cell.close();
    await dlq.close();
  });
});
