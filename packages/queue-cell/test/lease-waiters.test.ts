import { describe, expect, it } from "vitest";
import { ManualClock } from "../src/index.ts";
import { LeaseWaiters } from "../src/lease-waiters.ts";
import type { LeasedMessage } from "../src/queue-cell.ts";

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
    const first = waiters.add({ max: 2, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined });
    const second = waiters.add({ max: 2, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined });
    let next = 0;
    const leased: string[] = [];
    const leaseFor = (spec: { max: number }): LeasedMessage[] => {
      const batch = Array.from({ length: spec.max }, () => message(`m${next++}`));
      leased.push(...batch.map((m) => m.id));
      return batch;
    };
    // Two serves in one group (a lease's own check and a commit's both asked for one): the
    // second must go to the next waiter, not lease more for the first.
    const a = waiters.serve(leaseFor);
    const b = waiters.serve(leaseFor);
    a.committed();
    b.committed();
    expect((await first).map((m) => m.id)).toEqual(["m0", "m1"]);
    expect((await second).map((m) => m.id)).toEqual(["m2", "m3"]);
    expect(leased).toEqual(["m0", "m1", "m2", "m3"]);
    expect(waiters.size).toBe(0);
  });

  it("closeAll leaves a waiter that a pending group serves to that group", async () => {
    const waiters = new LeaseWaiters(new ManualClock());
    const served = waiters.add({ max: 1, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined });
    const idle = waiters.add({ max: 1, visibilityMs: 30_000, deadlineMs: 10_000, signal: undefined });
    let calls = 0;
    const outcome = waiters.serve(() => (calls++ === 0 ? [message("m0")] : []));
    waiters.closeAll();
    expect(await idle).toEqual([]);
    outcome.committed();
    expect((await served).map((m) => m.id)).toEqual(["m0"]);
  });
});
