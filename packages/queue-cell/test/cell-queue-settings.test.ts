import { describe, expect, test } from "vitest";
import { limits } from "../src/index.ts";
import { bodies, cellHarness, refs, settle, text } from "./cell-harness.ts";

// Per-queue retention and the delivery-paused flag (Cloudflare's message_retention_period and
// delivery_paused), kept in the cell's persisted config.
describe("per-queue retention", () => {
  test("a queue keeps messages for its own retention, at its bounds", async () => {
    const h = cellHarness({ config: { retentionSeconds: limits.retentionSecondsMin } });
    await h.cell.send([text("short-lived")]);
    h.clock.advance(limits.retentionSecondsMin * 1000 - 1);
    await h.cell.tick();
    expect((await h.cell.counts()).ready).toBe(1);
    h.clock.advance(1);
    await settle();
    expect((await h.cell.counts()).ready).toBe(0);
    expect(() => h.open("q2", { config: { retentionSeconds: limits.retentionSecondsMin - 1 } })).toThrow(/retentionSeconds/);
    expect(() => h.open("q3", { config: { retentionSeconds: limits.retentionSecondsMax + 1 } })).toThrow(/retentionSeconds/);
    const longest = h.open("q4", { config: { retentionSeconds: limits.retentionSecondsMax } });
    expect(longest.queueConfig.retentionSeconds).toBe(limits.retentionSecondsMax);
    await longest.close();
    await h.cell.close();
  });

  test("lowered below a message's age, the message goes at once, leased or not; younger ones stay", async () => {
    const warnings: string[] = [];
    const h = cellHarness({ onWarning: (line) => warnings.push(line) });
    await h.cell.send([text("old-ready"), text("old-leased")]);
    const leased = await h.cell.lease({ max: 1, visibilityTimeoutSeconds: limits.visibilityTimeoutSecondsMax });
    h.clock.advance(3_600_000);
    await h.cell.send([text("young")]);
    h.clock.advance(60_000);
    await h.cell.configure({ retentionSeconds: 1_800 });
    expect(await h.cell.counts()).toMatchObject({ ready: 1, leased: 0 });
    expect(bodies(await h.cell.lease({ max: 10 }))).toEqual(["young"]);
    // The lease of a message retention took is stale, not an error.
    expect((await h.cell.ack(refs(leased))).staleLeases).toHaveLength(1);
    expect(warnings).toEqual([expect.stringMatching(/^queue "q": 2 messages reached the 1800-second retention/)]);
    // Raised again, it holds from then on; the file keeps it.
    await h.cell.configure({ retentionSeconds: limits.retentionSeconds });
    await h.cell.close();
    const reopened = h.open("q");
    expect(reopened.queueConfig.retentionSeconds).toBe(limits.retentionSeconds);
    await reopened.close();
  });
});

describe("delivery paused", () => {
  test("is kept in the file, and told to listeners when it changes", async () => {
    const h = cellHarness();
    const told: boolean[] = [];
    const stop = h.cell.onDeliveryPausedChange((config) => told.push(config.deliveryPaused));
    await h.cell.configure({ deliveryPaused: true });
    await h.cell.configure({ maxDeliveries: 3 });
    // Sends are still taken while paused.
    await h.cell.send([text("kept")]);
    await h.cell.close();
    const reopened = h.open("q");
    expect(reopened.queueConfig).toMatchObject({ deliveryPaused: true, maxDeliveries: 3 });
    expect((await reopened.counts()).ready).toBe(1);
    stop();
    await reopened.configure({ deliveryPaused: false });
    expect(told).toEqual([true]);
    await reopened.close();
  });
});
