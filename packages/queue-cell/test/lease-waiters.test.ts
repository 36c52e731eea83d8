import { describe, expect, it } from "vitest";
import { ManualClock } from "../src/index.ts";
import { LeaseWaiters } from "../src/lease-waiters.ts";
import type { LeasedMessage } from "../src/store.ts";

const message = (id: string): LeasedMessage => ({
  id,
  leaseGeneration: 1,
  deliveries: 1,
  sentAt: 0,
  enqueuedAt: 0,
  availableAt: 0,
  leaseExpiresAt: 60_000,
  contentType: "text",
  attributes: null,
  body: new Uint8Array(),
});

describe("LeaseWaiters", () => {
  it("does not serve a waiter again while the group that served it is not yet committed", async () => {
    const waiters = new LeaseWaiters(new ManualClock());
    const first = waiters.add({ max: 2, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined, fill: false, owner: 0 });
    const second = waiters.add({ max: 2, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined, fill: false, owner: 0 });
    let next = 0;
    const leased: string[] = [];
    const leaseFor = (spec: { max: number }): LeasedMessage[] => {
      const batch = Array.from({ length: spec.max }, () => message(`m${next++}`));
      leased.push(...batch.map((m) => m.id));
      return batch;
    };
    // Two serves in one group (a lease's own check and a commit's both asked for one): the
    // second must go to the next waiter, not lease more for the first.
    const a = waiters.serve(leaseFor, () => true);
    const b = waiters.serve(leaseFor, () => true);
    a.committed();
    b.committed();
    expect((await first).map((m) => m.id)).toEqual(["m0", "m1"]);
    expect((await second).map((m) => m.id)).toEqual(["m2", "m3"]);
    expect(leased).toEqual(["m0", "m1", "m2", "m3"]);
    expect(waiters.size).toBe(0);
  });

  it("closeAll leaves a waiter that a pending group serves to that group", async () => {
    const waiters = new LeaseWaiters(new ManualClock());
    const served = waiters.add({ max: 1, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined, fill: false, owner: 0 });
    const idle = waiters.add({ max: 1, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined, fill: false, owner: 0 });
    let calls = 0;
    const outcome = waiters.serve(() => (calls++ === 0 ? [message("m0")] : []), () => true);
    waiters.closeAll();
    expect(await idle).toEqual([]);
    outcome.committed();
    expect((await served).map((m) => m.id)).toEqual(["m0"]);
  });

  it("a serve that throws part way leaves the waiters it served to the group's failure; the rest wait on", async () => {
    const clock = new ManualClock();
    const waiters = new LeaseWaiters(clock);
    const spec = { max: 1, visibilityMs: 30_000, signal: undefined, fill: false, owner: 0 };
    const first = waiters.add({ ...spec, deadlineMs: 10_000 });
    const second = waiters.add({ ...spec, deadlineMs: 10_000 });
    let calls = 0;
    const failOnSecond = (): LeasedMessage[] => {
      if (calls++ === 1) throw new Error("disk I/O error");
      return [message("m0")];
    };
    expect(() => waiters.serve(failOnSecond, () => true)).toThrow("disk I/O error");
    // The group's error, as its callers are given it, is what the served waiter is told.
    const failure = new Error("the queue's storage failed");
    waiters.groupFailed(failure);
    await expect(first).rejects.toBe(failure);
    expect(waiters.size).toBe(1);
    clock.advance(10_000);
    expect(await second).toEqual([]);
    expect(waiters.size).toBe(0);
  });

  it("a waiter a failed serve had leased for is answerable again by its deadline", async () => {
    const clock = new ManualClock();
    const waiters = new LeaseWaiters(clock);
    const spec = { max: 1, visibilityMs: 30_000, signal: undefined, fill: false, owner: 0 };
    const waiting = waiters.add({ ...spec, deadlineMs: 10_000 });
    void waiters.add({ ...spec, deadlineMs: 20_000 });
    let calls = 0;
    const leaseThenFail = (): LeasedMessage[] => {
      if (calls++ === 0) return [message("m0")];
      throw new Error("disk I/O error");
    };
    expect(() => waiters.serve(leaseThenFail, () => true)).toThrow("disk I/O error");
    clock.advance(10_000);
    expect(await waiting).toEqual([]);
  });

  describe("a fill waiter", () => {
    const spec = { max: 3, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined, owner: 0 };
    const leaseUpTo = (available: string[]) => (w: { max: number }) => available.splice(0, w.max).map(message);

    it("is passed over until its max can be filled, and the waiters behind it are served meanwhile", async () => {
      const clock = new ManualClock();
      const waiters = new LeaseWaiters(clock);
      const filling = waiters.add({ ...spec, deadlineMs: clock.now() + 10_000, fill: true });
      const plain = waiters.add({ ...spec, deadlineMs: clock.now() + 10_000, max: 1, fill: false });
      const available = ["a", "b"];
      waiters.serve(leaseUpTo(available), (max) => available.length >= max).committed();
      expect((await plain).map((m) => m.id)).toEqual(["a"]);
      expect(waiters.size).toBe(1);
      available.push("c", "d");
      waiters.serve(leaseUpTo(available), (max) => available.length >= max).committed();
      expect((await filling).map((m) => m.id)).toEqual(["b", "c", "d"]);
      expect(waiters.size).toBe(0);
    });

    it("at its deadline asks for a group, which serves it what is due, or nothing", async () => {
      const clock = new ManualClock();
      let asked = 0;
      const waiters = new LeaseWaiters(clock, () => asked++);
      const some = waiters.add({ ...spec, deadlineMs: clock.now() + 10_000, fill: true });
      const none = waiters.add({ ...spec, deadlineMs: clock.now() + 20_000, fill: true });
      const available = ["a"];
      const cannotFill = (): boolean => false;
      clock.advance(9_999);
      expect(asked).toBe(0);
      clock.advance(1);
      expect(asked).toBe(1);
      waiters.serve(leaseUpTo(available), cannotFill).committed();
      expect((await some).map((m) => m.id)).toEqual(["a"]);
      clock.advance(10_000);
      expect(asked).toBe(2);
      waiters.serve(leaseUpTo(available), cannotFill).committed();
      expect(await none).toEqual([]);
      expect(waiters.size).toBe(0);
    });

    it("at its deadline leaves even behind a plain waiter that finds nothing", async () => {
      const clock = new ManualClock();
      const waiters = new LeaseWaiters(clock, () => {});
      const plain = waiters.add({ ...spec, deadlineMs: clock.now() + 20_000, fill: false });
      const filling = waiters.add({ ...spec, deadlineMs: clock.now() + 10_000, fill: true });
      clock.advance(10_000);
      const none: string[] = [];
      waiters.serve(leaseUpTo(none), () => false).committed();
      expect(await filling).toEqual([]);
      expect(waiters.size).toBe(1);
      clock.advance(10_000);
      expect(await plain).toEqual([]);
    });

    it("whose deadline has come is told when a group fails, rather than left waiting for the next", async () => {
      const clock = new ManualClock();
      const waiters = new LeaseWaiters(clock, () => {});
      const expired = waiters.add({ ...spec, deadlineMs: clock.now() + 10_000, fill: true });
      const early = waiters.add({ ...spec, deadlineMs: clock.now() + 20_000, fill: true });
      clock.advance(10_000);
      const failure = new Error("disk I/O error");
      waiters.groupFailed(failure);
      await expect(expired).rejects.toBe(failure);
      // One whose deadline has not come waits on: its own deadline asks for a group again.
      expect(waiters.size).toBe(1);
      clock.advance(10_000);
      waiters.serve(leaseUpTo([]), () => false).committed();
      expect(await early).toEqual([]);
    });

    it("leaves empty at once when its signal aborts, without a group", async () => {
      let asked = 0;
      const clock = new ManualClock();
      const waiters = new LeaseWaiters(clock, () => asked++);
      const controller = new AbortController();
      const aborted = waiters.add({ ...spec, deadlineMs: clock.now() + 10_000, signal: controller.signal, fill: true });
      controller.abort();
      expect(await aborted).toEqual([]);
      expect(asked).toBe(0);
      expect(waiters.size).toBe(0);
    });
  });
});
