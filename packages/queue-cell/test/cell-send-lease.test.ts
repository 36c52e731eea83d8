import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, test } from "vitest";
import { QueueCell, isCellError, limits, type CellStore } from "../src/index.ts";
import { ObservedStore, bodies, cellHarness, refs, settle, sqliteStore, text } from "./cell-harness.ts";

describe("send", () => {
  test("resolves with ids once committed; the messages survive reopening", async () => {
    const h = cellHarness();
    const sent = await h.cell.send([text("a"), text("b")]);
    expect(sent.ids).toHaveLength(2);
    expect(new Set(sent.ids).size).toBe(2);
    expect(sent.metrics).toEqual({ backlogCount: 2, backlogBytes: 2, oldestMessageTimestamp: h.clock.now() });
    await h.cell.close();
    const again = h.open("q");
    const leased = await again.lease({ max: 10 });
    expect(leased.map((m) => m.id)).toEqual(sent.ids);
    expect(bodies(leased)).toEqual(["a", "b"]);
    await again.close();
  });

  test("a message keeps its id, sent time, content type and attributes on every delivery", async () => {
    const h = cellHarness({ config: { maxDeliveries: 3 } });
    const [id] = (await h.cell.send([{ ...text("x"), contentType: "json", attributes: '{"type":"t"}' }])).ids;
    const sentAt = h.clock.now();
    for (let delivery = 1; delivery <= 3; delivery++) {
      h.clock.advance(1000);
      const [m] = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 5 });
      expect(m).toMatchObject({ id, deliveries: delivery, sentAt, contentType: "json", attributes: '{"type":"t"}' });
      await h.cell.nack(refs([m!]));
    }
    await h.cell.close();
  });

  test("delays: per message beats per call beats the queue's default", async () => {
    const h = cellHarness({ config: { deliveryDelaySeconds: 30 } });
    await h.cell.send([text("default")]);
    await h.cell.send([text("call")], { delaySeconds: 10 });
    await h.cell.send([text("message", { delaySeconds: 0 })], { delaySeconds: 10 });
    const first = await h.cell.lease({ max: 10 });
    expect(bodies(first)).toEqual(["message"]);
    expect(await h.cell.counts()).toMatchObject({ ready: 0, delayed: 2, leased: 1 });
    await h.cell.ack(refs(first));
    h.clock.advance(9_999);
    expect(await h.cell.lease({ max: 10 })).toEqual([]);
    h.clock.advance(1);
    expect(bodies(await h.cell.lease({ max: 10 }))).toEqual(["call"]);
    h.clock.advance(20_000);
    expect(bodies(await h.cell.lease({ max: 10 }))).toEqual(["default"]);
    await h.cell.close();
  });

  test("concurrent sends share one commit (group commit)", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "g", store: observed.wrap(), clock: h.clock });
    await settle();
    const before = observed.transactions;
    const results = await Promise.all(
      Array.from({ length: limits.producerCallsInFlightMax }, (_, i) => cell.send([text(String(i))])),
    );
    expect(results).toHaveLength(limits.producerCallsInFlightMax);
    expect(observed.transactions - before).toBe(1);
    expect((await cell.counts()).ready).toBe(limits.producerCallsInFlightMax);
    await cell.close();
  });

  test("a failed commit rejects every call of its group and writes none of them", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "f", store: observed.wrap(), clock: h.clock });
    await cell.send([text("kept")]);
    observed.failNext = true;
    const failed = await Promise.allSettled([cell.send([text("lost-1")]), cell.send([text("lost-2")])]);
    for (const r of failed) {
      expect(r.status).toBe("rejected");
      expect(isCellError((r as PromiseRejectedResult).reason, "ERR_STORAGE")).toBe(true);
      expect(((r as PromiseRejectedResult).reason as { retryable: boolean }).retryable).toBe(true);
    }
    expect(await cell.counts()).toMatchObject({ ready: 1, backlogBytes: 4 });
    expect(bodies(await cell.lease({ max: 10 }))).toEqual(["kept"]);
    await cell.close();
  });

  test("a send's trace is told its group's start and commit, in order, before the send resolves; a failed group commits nothing", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "t", store: observed.wrap(), clock: h.clock });
    const seen: string[] = [];
    const trace = (name: string) => ({ groupStarted: () => seen.push(`${name} started`), committed: () => seen.push(`${name} committed`) });
    await Promise.all([
      cell.send([text("a")], { trace: trace("a") }).then(() => seen.push("a resolved")),
      cell.send([text("b")], { trace: trace("b") }).then(() => seen.push("b resolved")),
    ]);
    expect(seen).toEqual(["a started", "b started", "a committed", "b committed", "a resolved", "b resolved"]);
    seen.length = 0;
    observed.failNext = true;
    await expect(cell.send([text("c")], { trace: trace("c") })).rejects.toThrow();
    expect(seen).toEqual(["c started"]);
    await cell.close();
  });
});

describe("a send in a group with a consumer's calls", () => {
  test("is answered first: the ack and the lease it served follow, from the same commit", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "o", store: observed.wrap(), clock: h.clock });
    await cell.send([text("first")]);
    const leased = await cell.lease({ max: 1 });
    const waiting = cell.lease({ max: 5, waitSeconds: 20 });
    await settle();
    const before = observed.transactions;
    const seen: string[] = [];
    // Asked in this order, so without the send going first the ack would be answered first.
    await Promise.all([
      cell.ack(refs(leased)).then(() => seen.push("ack")),
      cell.send([text("second")]).then(() => seen.push("send")),
      waiting.then((batch) => seen.push(`lease ${bodies(batch).join()}`)),
    ]);
    expect(seen[0]).toBe("send");
    expect(seen.slice(1).sort()).toEqual(["ack", "lease second"]);
    expect(observed.transactions - before).toBe(1);
    await cell.close();
  });
});

describe("a failed group", () => {
  test("a lease expiry it applied and rolled back is applied by the next group", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "f", store: observed.wrap(), clock: h.clock });
    await cell.send([text("a")]);
    await cell.lease({ max: 1, visibilityTimeoutSeconds: 10 });
    h.clock.advance(11_000);
    observed.failNext = true;
    await expect(cell.counts()).rejects.toMatchObject({ code: "ERR_STORAGE" });
    expect(await cell.counts()).toMatchObject({ ready: 1, leased: 0 });
    await cell.close();
  });

  test("a group that fails while serving waiting leases fails the ones it served; the others wait on", async () => {
    const h = cellHarness();
    const leases = new FailingLeases(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "f", store: leases.store, clock: h.clock });
    await settle();
    const first = cell.lease({ max: 1, waitSeconds: 10 });
    let secondAnswer: string[] | undefined;
    const second = cell.lease({ max: 1, waitSeconds: 10 }).then((m) => (secondAnswer = bodies(m)));
    await settle();
    // The second waiter's lease fails inside the group, after the first's succeeded.
    leases.failCall(2);
    await expect(cell.send([text("a"), text("b")])).rejects.toMatchObject({ code: "ERR_STORAGE" });
    await expect(first).rejects.toMatchObject({ code: "ERR_STORAGE" });
    // Nothing was leased or sent; the second waiter still waits, and leaves at its deadline.
    expect(await cell.counts()).toMatchObject({ ready: 0, leased: 0 });
    expect(secondAnswer).toBeUndefined();
    h.clock.advance(10_000);
    await second;
    expect(secondAnswer).toEqual([]);
    await cell.close();
  });

  test("a filling lease whose deadline group fails is told so, not left waiting", async () => {
    const h = cellHarness();
    const leases = new FailingLeases(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "f", store: leases.store, clock: h.clock });
    await cell.send([text("a")]);
    const filling = cell.lease({ max: 5, waitSeconds: 2, fill: true });
    await settle();
    // The group its deadline asks for fails as it leases: no later group is coming to serve it.
    leases.failCall(1);
    h.clock.advance(2_000);
    await expect(filling).rejects.toMatchObject({ code: "ERR_STORAGE" });
    // The message was not leased, and the next lease takes it.
    expect(bodies(await cell.lease({ max: 5 }))).toEqual(["a"]);
    await cell.close();
  });
});

/** A store whose lease() fails, once, at the call chosen (counted from when it is chosen). */
class FailingLeases {
  readonly store: CellStore;
  private calls = 0;
  private failAt: number | undefined;

  constructor(inner: CellStore) {
    this.store = new Proxy(inner, {
      get: (target, key) => {
        const value = Reflect.get(target, key) as unknown;
        if (typeof value !== "function") return value;
        if (key !== "lease") return (value as (...a: unknown[]) => unknown).bind(target);
        return (...args: unknown[]) => {
          if (++this.calls === this.failAt) throw new Database.SqliteError("disk I/O error (injected)", "SQLITE_IOERR");
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  }

  failCall(nth: number): void {
    this.failAt = this.calls + nth;
  }
}

describe("admission", () => {
  test(`the call after ${limits.producerCallsInFlightMax} in flight is refused at once and writes nothing`, async () => {
    const h = cellHarness();
    const accepted = Array.from({ length: limits.producerCallsInFlightMax }, (_, i) => h.cell.send([text(`m${i}`)]));
    expect(h.cell.inFlight).toBe(limits.producerCallsInFlightMax);
    const refused = h.cell.send([text("one too many")]);
    await expect(refused).rejects.toMatchObject({
      code: "ERR_CELL_OVERLOADED",
      retryable: true,
      bound: `at most ${limits.producerCallsInFlightMax} calls in flight`,
    });
    await Promise.all(accepted);
    expect(h.cell.inFlight).toBe(0);
    const counts = await h.cell.counts();
    expect(counts.ready).toBe(limits.producerCallsInFlightMax);
    // Room again once the group committed.
    await h.cell.send([text("later")]);
    await h.cell.close();
  });
});

describe("lease", () => {
  test("a lease hides messages for its visibility timeout; expiry returns them and counts a delivery", async () => {
    const h = cellHarness();
    await h.cell.send([text("a")]);
    const [first] = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    expect(first).toMatchObject({ deliveries: 1, leaseExpiresAt: h.clock.now() + 30_000 });
    expect(await h.cell.lease({ max: 1 })).toEqual([]);
    h.clock.advance(29_999);
    expect(await h.cell.lease({ max: 1 })).toEqual([]);
    h.clock.advance(1);
    const [second] = await h.cell.lease({ max: 1 });
    // Available again from the moment the first lease ran out.
    expect(second).toMatchObject({ id: first!.id, deliveries: 2, availableAt: first!.leaseExpiresAt });
    expect(second!.leaseGeneration).toBeGreaterThan(first!.leaseGeneration);
    await h.cell.close();
  });

  test("the queue's visibility timeout is the default", async () => {
    const h = cellHarness({ config: { visibilityTimeoutSeconds: 5 } });
    await h.cell.send([text("a")]);
    const [m] = await h.cell.lease({ max: 1 });
    expect(m!.leaseExpiresAt - h.clock.now()).toBe(5_000);
    await h.cell.close();
  });

  test("leases at most max messages, the earliest visible first", async () => {
    const h = cellHarness();
    await h.cell.send([text("late", { delaySeconds: 1 })]);
    await h.cell.send(Array.from({ length: 5 }, (_, i) => text(`m${i}`)));
    expect(bodies(await h.cell.lease({ max: 3 }))).toEqual(["m0", "m1", "m2"]);
    h.clock.advance(1000);
    // A batch comes back in arrival order; which messages it holds follows visible time.
    expect(bodies(await h.cell.lease({ max: 3 }))).toEqual(["late", "m3", "m4"]);
    await h.cell.close();
  });

  test("ack removes; nack returns at once or after its delay", async () => {
    const h = cellHarness();
    await h.cell.send([text("acked"), text("nacked"), text("nacked-later")]);
    const leased = await h.cell.lease({ max: 3 });
    const result = await h.cell.settle({
      acks: refs([leased[0]!]),
      nacks: [refs([leased[1]!])[0]!, { ...refs([leased[2]!])[0]!, delaySeconds: 60 }],
    });
    expect(result).toEqual({ acked: 1, retried: 2, deadLettered: 0, staleLeases: [] });
    const again = await h.cell.lease({ max: 10 });
    expect(bodies(again)).toEqual(["nacked"]);
    expect(await h.cell.counts()).toMatchObject({ delayed: 1, leased: 1 });
    await h.cell.ack(refs(again));
    h.clock.advance(60_000);
    const [later] = await h.cell.lease({ max: 10 });
    expect(later).toMatchObject({ deliveries: 2 });
    await h.cell.close();
  });
});

describe("fencing", () => {
  test("an ack or nack from an expired lease is stale once another lease took the message", async () => {
    const h = cellHarness();
    await h.cell.send([text("a")]);
    const [slow] = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 10 });
    h.clock.advance(10_000);
    const [fast] = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 10 });
    const staleAck = await h.cell.ack(refs([slow!]));
    expect(staleAck).toEqual({
      acked: 0,
      retried: 0,
      deadLettered: 0,
      staleLeases: [{ id: slow!.id, leaseGeneration: slow!.leaseGeneration }],
    });
    const staleNack = await h.cell.nack(refs([slow!]));
    expect(staleNack.staleLeases).toHaveLength(1);
    expect(await h.cell.counts()).toMatchObject({ leased: 1 });
    expect(await h.cell.ack(refs([fast!]))).toMatchObject({ acked: 1, staleLeases: [] });
    expect(await h.cell.ack(refs([fast!]))).toMatchObject({ acked: 0, staleLeases: refs([fast!]) });
    await h.cell.close();
  });

  test("a late ack still applies when no other lease took the message", async () => {
    const h = cellHarness();
    await h.cell.send([text("a")]);
    const [m] = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 1 });
    h.clock.advance(5_000);
    expect(await h.cell.ack(refs([m!]))).toMatchObject({ acked: 1 });
    expect((await h.cell.counts()).ready).toBe(0);
    await h.cell.close();
  });

  test("lease generations are persisted: after reopening, a pre-restart lease stays stale", async () => {
    const h = cellHarness();
    await h.cell.send([text("a")]);
    const [before] = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 1 });
    await h.cell.close();
    h.clock.advance(1_000);
    const reopened = h.open("q");
    const [after] = await reopened.lease({ max: 1 });
    expect(after!.leaseGeneration).toBeGreaterThan(before!.leaseGeneration);
    expect((await reopened.ack(refs([before!]))).staleLeases).toHaveLength(1);
    expect((await reopened.ack(refs([after!]))).acked).toBe(1);
    await reopened.close();
  });

  test("one ack call naming a message twice acks the ref that holds it, once", async () => {
    const h = cellHarness();
    await h.cell.send([text("a"), text("b")]);
    const [a, b] = await h.cell.lease({ max: 2, visibilityTimeoutSeconds: 30 });
    const stale = { id: a!.id, leaseGeneration: a!.leaseGeneration - 1 + 10 };
    expect(await h.cell.ack([stale, refs([a!])[0]!, refs([b!])[0]!, refs([b!])[0]!])).toEqual({
      acked: 2,
      retried: 0,
      deadLettered: 0,
      staleLeases: [stale, refs([b!])[0]!],
    });
    expect((await h.cell.counts()).leased).toBe(0);
    await h.cell.close();
  });

  test("unknown ids are stale, not errors", async () => {
    const h = cellHarness();
    expect(await h.cell.ack([{ id: "nope", leaseGeneration: 1 }])).toMatchObject({
      staleLeases: [{ id: "nope", leaseGeneration: 1 }],
    });
    await h.cell.close();
  });
});

describe("long-poll wait", () => {
  test("answers as soon as a message is sent", async () => {
    const h = cellHarness();
    const waiting = h.cell.lease({ max: 5, waitSeconds: 20 });
    await settle();
    await h.cell.send([text("now")]);
    expect(bodies(await waiting)).toEqual(["now"]);
    await h.cell.close();
  });

  test("with nothing to take, waits without a commit; the send that wakes it is one commit", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "w", store: observed.wrap(), clock: h.clock });
    await cell.send([text("first")]);
    await cell.lease({ max: 1 });
    await settle();
    const before = observed.transactions;
    const waiting = cell.lease({ max: 5, waitSeconds: 20 });
    await settle();
    expect(observed.transactions - before).toBe(0);
    await cell.send([text("second")]);
    expect(bodies(await waiting)).toEqual(["second"]);
    expect(observed.transactions - before).toBe(1);
    await cell.close();
  });

  test("one whose first attempt is answered by close() answers at close, not at its deadline", async () => {
    const h = cellHarness();
    await h.cell.send([text("old")]);
    // Retention falls due, so the long poll makes a first attempt (whose group sweeps it) before
    // it waits; close() answers that attempt's group.
    h.clock.advance(limits.retentionSeconds * 1000 + 1_000);
    let answer: string[] | undefined;
    const poll = h.cell.lease({ max: 5, waitSeconds: 20 }).then((m) => (answer = bodies(m)));
    await h.cell.close();
    await settle();
    expect(answer).toEqual([]);
    await poll;
  });

  test("answers empty at the end of the wait", async () => {
    const h = cellHarness();
    let answer: unknown;
    const waiting = h.cell.lease({ max: 5, waitSeconds: 20 }).then((m) => (answer = m));
    await settle();
    h.clock.advance(19_999);
    await settle();
    expect(answer).toBeUndefined();
    h.clock.advance(1);
    await waiting;
    expect(answer).toEqual([]);
    await h.cell.close();
  });

  test("wakes when a delayed message becomes visible", async () => {
    const h = cellHarness();
    await h.cell.send([text("soon", { delaySeconds: 5 })]);
    const waiting = h.cell.lease({ max: 5, waitSeconds: 20 });
    await settle();
    h.clock.advance(5_000);
    expect(bodies(await waiting)).toEqual(["soon"]);
    await h.cell.close();
  });

  test("wakes when a lease expires and returns its message", async () => {
    const h = cellHarness();
    await h.cell.send([text("again")]);
    await h.cell.lease({ max: 1, visibilityTimeoutSeconds: 3 });
    const waiting = h.cell.lease({ max: 5, waitSeconds: 20 });
    await settle();
    h.clock.advance(3_000);
    const [m] = await waiting;
    expect(m).toMatchObject({ deliveries: 2 });
    await h.cell.close();
  });

  test("an aborted wait answers empty and leases nothing", async () => {
    const h = cellHarness();
    const controller = new AbortController();
    const waiting = h.cell.lease({ max: 5, waitSeconds: 20, signal: controller.signal });
    await settle();
    controller.abort();
    expect(await waiting).toEqual([]);
    await h.cell.send([text("for someone else")]);
    expect(bodies(await h.cell.lease({ max: 5 }))).toEqual(["for someone else"]);
    await h.cell.close();
  });

  test("waiters are served in arrival order and share what arrives", async () => {
    const h = cellHarness();
    const first = h.cell.lease({ max: 2, waitSeconds: 20 });
    const second = h.cell.lease({ max: 2, waitSeconds: 20 });
    await settle();
    await h.cell.send([text("a"), text("b"), text("c")]);
    expect(bodies(await first)).toEqual(["a", "b"]);
    expect(bodies(await second)).toEqual(["c"]);
    await h.cell.close();
  });

  test("closing the cell answers waiters empty", async () => {
    const h = cellHarness();
    const waiting = h.cell.lease({ max: 1, waitSeconds: 20 });
    await settle();
    await h.cell.close();
    expect(await waiting).toEqual([]);
    await expect(h.cell.send([text("x")])).rejects.toMatchObject({ code: "ERR_CELL_CLOSED" });
  });
});

describe("release", () => {
  test("hands a lease back: ready at once, the delivery not counted, the old generation stale", async () => {
    const h = cellHarness();
    await h.cell.send([text("a")]);
    const [m] = await h.cell.lease({ max: 1 });
    expect(await h.cell.release(refs([m!]))).toEqual({ released: 1, staleLeases: [] });
    // The released lease is stale at once: its holder let go.
    expect(await h.cell.ack(refs([m!]))).toMatchObject({ acked: 0, staleLeases: refs([m!]) });
    const [again] = await h.cell.lease({ max: 1 });
    expect(again).toMatchObject({ id: m!.id, deliveries: 1 });
    expect(await h.cell.release(refs([m!]))).toEqual({ released: 0, staleLeases: refs([m!]) });
    await h.cell.close();
  });
});

describe("opening and configuring", () => {
  test("an open refused for its settings writes nothing; the file opens again as it was", async () => {
    const h = cellHarness();
    await h.cell.send([text("kept")]);
    await h.cell.close();
    expect(() => h.open("q", { resolveCell: undefined, config: { deadLetter: { kind: "queue", queue: "elsewhere" } } })).toThrow(
      /has no way to reach other queues/,
    );
    const again = h.open("q", { resolveCell: undefined });
    expect(again.queueConfig.deadLetter).toEqual({ kind: "set" });
    expect((await again.counts()).ready).toBe(1);
    await again.close();
  });

  test("a settings change whose commit fails leaves the old settings in force", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "c", store: observed.wrap(), clock: h.clock });
    observed.failNext = true;
    await expect(cell.configure({ maxDeliveries: 9 })).rejects.toMatchObject({ code: "ERR_STORAGE" });
    expect(cell.queueConfig.maxDeliveries).toBe(limits.maxDeliveriesDefault);
    await cell.close();
  });

  // Counted in /proc, so on Linux only.
  test.skipIf(!existsSync("/proc/self/fd"))("a file that fails to open leaves no descriptor open", () => {
    const h = cellHarness();
    const path = join(h.dir, "not-a-database.sqlite");
    writeFileSync(path, "this is not an SQLite database, and is long enough to have a header".repeat(10));
    const descriptors = (): number => readdirSync("/proc/self/fd").length;
    const before = descriptors();
    for (let i = 0; i < 5; i++) {
      expect(() => new QueueCell({ name: "bad", path, clock: h.clock, durability: "full" })).toThrow(/not a database/);
    }
    expect(descriptors()).toBe(before);
  });

  test("a Worker consumer's max_retries of 100 (101 deliveries) is a valid cell setting", () => {
    const h = cellHarness();
    const cell = h.open("w", { config: { maxDeliveries: limits.maxRetriesMax + 1 } });
    expect(cell.queueConfig.maxDeliveries).toBe(101);
    return cell.close();
  });
});

describe("readyCount (how a consumer judges its backlog)", () => {
  test("counts messages ready now, up to its bound: not delayed, not leased; packs by their messages", async () => {
    const h = cellHarness();
    // One send of three is stored as one row; it counts as three.
    await h.cell.send([text("a"), text("b"), text("c")]);
    await h.cell.send([text("later", { delaySeconds: 5 })]);
    expect(h.cell.readyCount(10)).toBe(3);
    expect(h.cell.readyCount(2)).toBe(2);
    await h.cell.lease({ max: 1 });
    expect(h.cell.readyCount(10)).toBe(2);
    h.clock.advance(5_000);
    expect(h.cell.readyCount(10)).toBe(3);
    expect(() => h.cell.readyCount(0)).toThrow(/atMost/);
    await h.cell.close();
    expect(() => h.cell.readyCount(1)).toThrow(/closed/);
  });
});

describe("a lease that fills (how a consumer collects a batch)", () => {
  test("waits for max due messages and takes them in one lease, not one per send", async () => {
    const h = cellHarness();
    const observed = new ObservedStore(sqliteStore(h.dir));
    const cell = new QueueCell({ name: "f", store: observed.wrap(), clock: h.clock });
    let answer: string[] | undefined;
    const filling = cell.lease({ max: 3, waitSeconds: 10, fill: true }).then((m) => (answer = bodies(m)));
    await settle();
    await cell.send([text("a")]);
    await cell.send([text("b")]);
    await settle();
    expect(answer).toBeUndefined();
    // Nothing was leased early: another consumer may still take what is there.
    expect(await cell.counts()).toMatchObject({ ready: 2, leased: 0 });
    await cell.send([text("c"), text("d")]);
    await filling;
    expect(answer).toEqual(["a", "b", "c"]);
    expect(await cell.counts()).toMatchObject({ ready: 1, leased: 3 });
    await cell.close();
  });

  test("with max due already, is served at once", async () => {
    const h = cellHarness();
    await h.cell.send([text("a"), text("b")]);
    expect(bodies(await h.cell.lease({ max: 2, waitSeconds: 10, fill: true }))).toEqual(["a", "b"]);
    await h.cell.close();
  });

  test("at the end of its wait takes whatever is due, or answers empty", async () => {
    const h = cellHarness();
    await h.cell.send([text("a"), text("later", { delaySeconds: 60 })]);
    let answer: string[] | undefined;
    const some = h.cell.lease({ max: 5, waitSeconds: 2, fill: true }).then((m) => (answer = bodies(m)));
    await settle();
    h.clock.advance(1_999);
    await settle();
    expect(answer).toBeUndefined();
    h.clock.advance(1);
    await some;
    expect(answer).toEqual(["a"]);
    const none = h.cell.lease({ max: 5, waitSeconds: 2, fill: true });
    await settle();
    h.clock.advance(2_000);
    expect(await none).toEqual([]);
    await h.cell.close();
  });

  test("counts a delayed message once it is visible, and a plain lease behind it is not held up", async () => {
    const h = cellHarness();
    await h.cell.send([text("a"), text("soon", { delaySeconds: 5 })]);
    const filling = h.cell.lease({ max: 2, waitSeconds: 20, fill: true });
    await settle();
    h.clock.advance(5_000);
    expect(bodies(await filling)).toEqual(["a", "soon"]);
    const waiting = h.cell.lease({ max: 3, waitSeconds: 20, fill: true });
    const plain = h.cell.lease({ max: 1, waitSeconds: 20 });
    await settle();
    await h.cell.send([text("x")]);
    expect(bodies(await plain)).toEqual(["x"]);
    await h.cell.send([text("y"), text("z"), text("w")]);
    expect(bodies(await waiting)).toEqual(["y", "z", "w"]);
    await h.cell.close();
  });

  test("an aborted fill answers empty and leases nothing", async () => {
    const h = cellHarness();
    await h.cell.send([text("a")]);
    const controller = new AbortController();
    const filling = h.cell.lease({ max: 5, waitSeconds: 20, fill: true, signal: controller.signal });
    await settle();
    controller.abort();
    expect(await filling).toEqual([]);
    expect(await h.cell.counts()).toMatchObject({ ready: 1, leased: 0 });
    await h.cell.close();
  });
});

describe("ending the leases of an owner that died (a host's next start)", () => {
  test("each counts as a failed delivery and is ready at once; other leases are untouched", async () => {
    const h = cellHarness({ config: { maxDeliveries: 2 } });
    await h.cell.send([text("a"), text("b"), text("c")]);
    const [a] = await h.cell.lease({ max: 1, owner: 1 });
    const [b] = await h.cell.lease({ max: 1, owner: 1, visibilityTimeoutSeconds: 3_600 });
    const [c] = await h.cell.lease({ max: 1 });
    await h.cell.close();
    const reopened = h.open("q");
    expect(await reopened.expireLeasesOf(1)).toBe(2);
    expect(await reopened.counts()).toMatchObject({ ready: 2, leased: 1 });
    const again = await reopened.lease({ max: 10 });
    expect(again.map((m) => [m.id, m.deliveries])).toEqual([
      [a!.id, 2],
      [b!.id, 2],
    ]);
    // The lease that named nobody still holds.
    expect((await reopened.ack([{ id: c!.id, leaseGeneration: c!.leaseGeneration }])).acked).toBe(1);
    expect(await reopened.expireLeasesOf(1)).toBe(0);
    await reopened.close();
  });

  test("a message on its last allowed delivery is dead-lettered", async () => {
    const h = cellHarness({ config: { maxDeliveries: 1 } });
    await h.cell.send([text("last")]);
    await h.cell.lease({ max: 1, owner: 5 });
    expect(await h.cell.expireLeasesOf(5)).toBe(1);
    expect(await h.cell.counts()).toMatchObject({ ready: 0, leased: 0, dead: 1 });
    await h.cell.close();
  });

  test("an owner must be a whole number from 1", async () => {
    const h = cellHarness();
    for (const bad of [0, -1, 1.5]) {
      expect(isCellError(await h.cell.expireLeasesOf(bad).catch((e: unknown) => e), "ERR_OUT_OF_RANGE")).toBe(true);
    }
    expect(isCellError(await h.cell.lease({ max: 1, owner: -1 }).catch((e: unknown) => e), "ERR_OUT_OF_RANGE")).toBe(true);
    await h.cell.close();
  });
});
