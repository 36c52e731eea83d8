import { describe, expect, test } from "vitest";
import { emptyTally, limits, type CellObserver, type CellTally } from "../src/index.ts";
import { cellHarness, refs, settle, text } from "./cell-harness.ts";

const dayMs = 86_400_000;

/** Sums what the cell tells, as the host's metrics do. */
function counting() {
  const total: CellTally = emptyTally();
  const refused: string[] = [];
  const sends = { started: 0, committed: 0, failed: 0 };
  const observer: CellObserver = {
    committed(tally) {
      expect(Object.values(tally).some((v) => v !== 0)).toBe(true);
      for (const key of Object.keys(total) as Array<keyof CellTally>) total[key] += tally[key];
    },
    sendRefused: (code) => refused.push(code),
    sendStarted() {
      sends.started += 1;
      return (committed) => (committed ? (sends.committed += 1) : (sends.failed += 1));
    },
  };
  return { observer, total, refused, sends };
}

describe("the cell's observer", () => {
  test("counts a known workload exactly: sends, deliveries, acks, retries, dead letters, stale acks", async () => {
    const c = counting();
    const h = cellHarness({ observer: c.observer, config: { maxDeliveries: 2 } });
    await h.cell.send([text("a"), text("b"), text("c")]);
    await h.cell.send([text("d")]);
    const first = await h.cell.lease({ max: 4 });
    expect(first).toHaveLength(4);
    // a, c and d acked, b retried; then an ack of b's first lease after its second is stale.
    await h.cell.settle({ acks: refs([first[0]!, first[2]!, first[3]!]), nacks: refs([first[1]!]) });
    h.clock.advance(1);
    const [b] = await h.cell.lease({ max: 1 });
    expect((await h.cell.ack(refs([first[1]!]))).staleLeases).toHaveLength(1);
    await h.cell.nack(refs([b!]));
    h.clock.advance(1);
    await h.cell.replay();
    h.clock.advance(1);
    const [again] = await h.cell.lease({ max: 1 });
    await h.cell.ack(refs([again!]));
    expect(c.total).toEqual({
      ...emptyTally(),
      sent: 4,
      delivered: 6,
      acked: 4,
      retried: 1,
      deadLettered: 1,
      staleAcksRefused: 1,
      replayed: 1,
    });
    expect(c.sends).toEqual({ started: 2, committed: 2, failed: 0 });
    await h.cell.close();
  });

  test("counts expired leases, deletions after the last retry, retention and purges", async () => {
    const c = counting();
    const h = cellHarness({ observer: c.observer, config: { maxDeliveries: 1, deadLetter: { kind: "delete" } } });
    await h.cell.send([text("slow"), text("fails")]);
    const [slow, fails] = await h.cell.lease({ max: 2, visibilityTimeoutSeconds: 10 });
    await h.cell.nack(refs([fails!]));
    h.clock.advance(10_000);
    await settle();
    await h.cell.counts();
    expect(c.total).toMatchObject({ leasesExpired: 1, deletedAfterLastRetry: 2, deadLettered: 0 });
    expect(slow).toBeDefined();
    await h.cell.send([text("old")]);
    h.clock.advance(4 * dayMs + 1);
    await h.cell.tick();
    await h.cell.send([text("x"), text("y")]);
    await h.cell.purge("all");
    expect(c.total).toMatchObject({ sent: 5, expiredByRetention: 1, purged: 2 });
    await h.cell.close();
  });

  test("a refused send is told by its code, and counts nothing sent", async () => {
    const c = counting();
    const h = cellHarness({ observer: c.observer });
    const big = new Uint8Array(limits.messageBytesMax + 1);
    await expect(h.cell.send([{ body: big, contentType: "bytes" }])).rejects.toThrow();
    await expect(h.cell.send([text("late", { delaySeconds: -1 })])).rejects.toThrow();
    expect(c.refused).toHaveLength(2);
    expect(c.refused[0]).toMatch(/^ERR_/);
    expect(c.total.sent).toBe(0);
    expect(c.sends).toEqual({ started: 2, committed: 0, failed: 2 });
    await h.cell.close();
  });
});
