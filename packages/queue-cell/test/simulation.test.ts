import { join } from "node:path";
import { expect, test } from "vitest";
import { ManualClock, QueueCell, UlidSource, seededRandomFill, type LeasedMessage } from "../src/index.ts";
import { QueueModel, prng } from "./simulation-model.ts";
import { tempDir } from "./temp-dir.ts";

const slow = process.env.CELLD_SLOW === "1";
const seedCount = Number(process.env.CELLD_SIM_SEEDS ?? (slow ? 10_000 : 300));
const stepsPerSeed = 60;
const onlySeed = process.env.CELLD_SIM_SEED;

/**
 * Random sends, leases, fresh and stale acks and nacks, time jumps, replays and close/reopen,
 * checked step by step against QueueModel. A failure names its seed; CELLD_SIM_SEED=<n> replays it.
 */
async function simulate(seed: number, dir: string): Promise<void> {
  const rand = prng(seed);
  const maxDeliveries = 1 + rand.int(4);
  const clock = new ManualClock(Date.UTC(2026, 5, 1));
  const ids = new UlidSource(seededRandomFill(seed));
  const path = join(dir, `sim-${seed}.sqlite`);
  const open = (): QueueCell =>
    new QueueCell({ name: "sim", path, clock, ids, durability: "off", config: { maxDeliveries } });
  let cell = open();
  const model = new QueueModel(maxDeliveries);
  // Every lease ever handed out: fresh ones are current, others have gone stale.
  const held: LeasedMessage[] = [];
  // The same, as each lease call returned them: acked together, a whole send can go as one.
  const leases: LeasedMessage[][] = [];
  const step = async (what: string, check: () => Promise<void>): Promise<void> => {
    try {
      await check();
    } catch (error) {
      throw new Error(`step "${what}" at t=${clock.now()}: ${(error as Error).message}`, { cause: error });
    }
  };

  for (let i = 0; i < stepsPerSeed; i++) {
    const op = rand.int(100);
    if (op < 25) {
      const n = 1 + rand.int(5);
      const delays = Array.from({ length: n }, () => (rand.chance(0.3) ? rand.int(20) : 0));
      await step("send", async () => {
        const sent = await cell.send(delays.map((d, k) => ({ body: new Uint8Array([k]), contentType: "bytes", delaySeconds: d })));
        model.advanceTo(clock.now());
        model.send(sent.ids, clock.now(), delays);
      });
    } else if (op < 45) {
      const max = 1 + rand.int(6);
      const visibility = 1 + rand.int(30);
      await step("lease", async () => {
        const leased = await cell.lease({ max, visibilityTimeoutSeconds: visibility });
        model.advanceTo(clock.now());
        const expected = model.leasable(clock.now(), max);
        expect(leased.map((m) => m.id).sort()).toEqual(expected.map((m) => m.id).sort());
        for (const m of leased) {
          expect(model.acked.has(m.id), "an acked message came back").toBe(false);
          expect(m.deliveries, "deliveries beyond max").toBeLessThanOrEqual(maxDeliveries);
          // No two live leases: the model must not hold an unexpired lease on it.
          expect(model.messages.get(m.id)!.state).toBe("ready");
        }
        model.lease(leased.map((m) => m.id), clock.now() + visibility * 1000);
        held.push(...leased);
        if (leased.length > 0) leases.push(leased);
      });
    } else if (op < 50 && leases.length > 0) {
      const lease = leases[rand.int(leases.length)]!;
      await step("ack a whole lease", async () => {
        const refs = lease.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration }));
        const result = await cell.ack(refs);
        model.advanceTo(clock.now());
        const stale = refs.filter((ref) => !model.holds(ref.id, ref.leaseGeneration));
        expect(result.staleLeases).toEqual(stale);
        expect(result.acked).toBe(refs.length - stale.length);
        for (const ref of refs) if (!stale.includes(ref)) model.ack(ref.id);
      });
    } else if (op < 70 && held.length > 0) {
      const lease = held[rand.int(held.length)]!;
      const isAck = rand.chance(0.5);
      const delay = rand.chance(0.3) ? rand.int(10) : 0;
      await step(isAck ? "ack" : "nack", async () => {
        const ref = { id: lease.id, leaseGeneration: lease.leaseGeneration };
        const result = isAck ? await cell.ack([ref]) : await cell.nack([{ ...ref, delaySeconds: delay }]);
        model.advanceTo(clock.now());
        if (model.holds(lease.id, lease.leaseGeneration)) {
          expect(result.staleLeases).toEqual([]);
          if (isAck) {
            expect(result.acked).toBe(1);
            model.ack(lease.id);
          } else {
            const died = model.nack(lease.id, clock.now(), delay);
            expect(result.deadLettered).toBe(died ? 1 : 0);
          }
        } else {
          expect(result.staleLeases, "a stale generation applied").toEqual([ref]);
        }
      });
    } else if (op < 85) {
      const ms = rand.chance(0.05) ? (1 + rand.int(5)) * 86_400_000 : rand.int(40_000);
      clock.advance(ms);
    } else if (op < 90) {
      await step("replay", async () => {
        const { replayed } = await cell.replay();
        model.advanceTo(clock.now());
        expect(replayed).toBe(model.replayAll(clock.now()));
      });
    } else {
      await step("reopen", async () => {
        await cell.close();
        cell = open();
      });
    }
    await step("counts", async () => {
      const counts = await cell.counts();
      model.advanceTo(clock.now());
      expect({ ready: counts.ready, delayed: counts.delayed, leased: counts.leased, dead: counts.dead }).toEqual(
        model.counts(clock.now()),
      );
    });
  }
  await step("final", async () => {
    const dead = await cell.listDead({ limit: 1000 });
    model.advanceTo(clock.now());
    for (const d of dead) expect(model.deadLettered.get(d.id), "dead-lettered more than once").toBe(1);
  });
  await cell.close();
}

test(`simulation: ${onlySeed === undefined ? `${seedCount} seeds` : `seed ${onlySeed}`}`, { timeout: 3_600_000 }, async () => {
  const dir = tempDir("celld-sim-");
  const seeds = onlySeed === undefined ? Array.from({ length: seedCount }, (_, i) => i + 1) : [Number(onlySeed)];
  for (const seed of seeds) {
    try {
      await simulate(seed, dir);
    } catch (error) {
      throw new Error(
        `simulation failed at seed ${seed}; replay with CELLD_SIM_SEED=${seed} npx vitest run simulation\n${(error as Error).message}`,
        { cause: error },
      );
    }
  }
});
