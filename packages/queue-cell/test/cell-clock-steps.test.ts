import { describe, expect, test } from "vitest";
import { ManualClock } from "../src/index.ts";
import { bodies, cellHarness, refs, settle, text } from "./cell-harness.ts";

const hourMs = 3_600_000;

/**
 * A cell opened on a clock behind the times it stored (a host restarted with its clock hours
 * slow, or set back by hand) never lets time go back, so entry times keep rising with seq. But
 * time must go on from there at the clock's pace: frozen until the clock caught up, no delay
 * would end, no lease would expire and no long poll would answer for hours.
 */
describe("a cell opened on a clock behind its stored times", () => {
  async function reopenedBehind(stepBackMs: number) {
    const h = cellHarness();
    await h.cell.send([text("old")]);
    await h.cell.close();
    const clock = new ManualClock(h.clock.now() - stepBackMs);
    const cell = h.open("q", { clock });
    await settle();
    return { h, clock, cell };
  }

  test("a lease still expires after its visibility timeout", async () => {
    const { clock, cell } = await reopenedBehind(3 * hourMs);
    const [first] = await cell.lease({ max: 1, visibilityTimeoutSeconds: 30 });
    expect(first).toMatchObject({ deliveries: 1 });
    clock.advance(29_999);
    expect(await cell.lease({ max: 1 })).toEqual([]);
    clock.advance(1);
    await settle();
    const [again] = await cell.lease({ max: 1 });
    expect(again).toMatchObject({ id: first!.id, deliveries: 2 });
    await cell.close();
  });

  test("a delay sent after opening ends after its length, and a nack's delay too", async () => {
    const { clock, cell } = await reopenedBehind(3 * hourMs);
    const [old] = await cell.lease({ max: 1 });
    await cell.ack(refs([old!]));
    await cell.send([text("later")], { delaySeconds: 10 });
    clock.advance(9_999);
    expect(await cell.lease({ max: 1 })).toEqual([]);
    clock.advance(1);
    const leased = await cell.lease({ max: 1 });
    expect(bodies(leased)).toEqual(["later"]);
    await cell.nack([{ ...refs(leased)[0]!, delaySeconds: 5 }]);
    clock.advance(5_000);
    expect(bodies(await cell.lease({ max: 1 }))).toEqual(["later"]);
    await cell.close();
  });

  test("a long poll with nothing to take answers empty at the end of its wait", async () => {
    const { clock, cell } = await reopenedBehind(3 * hourMs);
    const [old] = await cell.lease({ max: 1 });
    await cell.ack(refs([old!]));
    let answer: unknown;
    const waiting = cell.lease({ max: 1, waitSeconds: 2 }).then((m) => (answer = m));
    await settle();
    clock.advance(2_000);
    await settle();
    expect(answer).toEqual([]);
    await waiting;
    await cell.close();
  });

  test("entry times still rise with the order of sending, and nothing is swept early", async () => {
    const { h, clock, cell } = await reopenedBehind(3 * hourMs);
    const sent = await cell.send([text("new")]);
    const counts = await cell.counts();
    expect(counts.ready).toBe(2);
    expect(sent.metrics.oldestMessageTimestamp).toBeLessThanOrEqual(h.clock.now());
    const leased = await cell.lease({ max: 2 });
    expect(bodies(leased)).toEqual(["old", "new"]);
    expect(leased[1]!.enqueuedAt).toBeGreaterThanOrEqual(leased[0]!.enqueuedAt);
    expect(clock.now()).toBeLessThan(leased[0]!.enqueuedAt);
    await cell.close();
  });

  test("a cell idle for its idle time reports so in the clock's time, as the registry reads it", async () => {
    const { clock, cell } = await reopenedBehind(3 * hourMs);
    await cell.counts();
    const since = cell.idleSince();
    expect(since).toBeDefined();
    expect(Math.abs(clock.now() - since!)).toBeLessThan(1_000);
    await cell.close();
  });
});
