import { limits } from "../src/index.ts";

/**
 * The reference the simulation checks the cell against: the message rules written as plainly as
 * possible, over an array, with no storage, no indexes and no group commit.
 */
export type ModelState = "ready" | "leased" | "dead";

export interface ModelMessage {
  id: string;
  order: number;
  state: ModelState;
  /** ready: visible time; leased: lease expiry; dead: dead-letter time. */
  dueAt: number;
  deliveries: number;
  generation: number;
  enqueuedAt: number;
}

export class QueueModel {
  readonly messages = new Map<string, ModelMessage>();
  readonly acked = new Set<string>();
  readonly deadLettered = new Map<string, number>();
  private order = 0;

  constructor(readonly maxDeliveries: number) {}

  /** Expiry then retention, as the cell does at the start of every group. */
  advanceTo(nowMs: number): void {
    for (const m of this.sorted()) {
      if (m.state === "leased" && m.dueAt <= nowMs) {
        if (m.deliveries >= this.maxDeliveries) this.kill(m, nowMs);
        else m.state = "ready";
      }
    }
    const cutoff = nowMs - limits.retentionSeconds * 1000;
    for (const m of [...this.messages.values()]) if (m.enqueuedAt <= cutoff) this.messages.delete(m.id);
  }

  send(ids: readonly string[], nowMs: number, delays: readonly number[]): void {
    ids.forEach((id, i) => {
      this.messages.set(id, {
        id,
        order: this.order++,
        state: "ready",
        dueAt: nowMs + delays[i]! * 1000,
        deliveries: 0,
        generation: 0,
        enqueuedAt: nowMs,
      });
    });
  }

  /** The messages a lease of `max` must take now. */
  leasable(nowMs: number, max: number): ModelMessage[] {
    return this.sorted()
      .filter((m) => m.state === "ready" && m.dueAt <= nowMs)
      .sort((a, b) => a.dueAt - b.dueAt || a.order - b.order)
      .slice(0, max);
  }

  lease(ids: readonly string[], expiresAt: number): void {
    for (const id of ids) {
      const m = this.messages.get(id)!;
      m.state = "leased";
      m.dueAt = expiresAt;
      m.deliveries += 1;
      m.generation += 1;
    }
  }

  /** Whether an ack/nack naming this generation applies. */
  holds(id: string, generation: number): boolean {
    const m = this.messages.get(id);
    return m !== undefined && m.state !== "dead" && m.generation === generation;
  }

  ack(id: string): void {
    this.messages.delete(id);
    this.acked.add(id);
  }

  /** Returns whether the nack dead-lettered the message. */
  nack(id: string, nowMs: number, delaySeconds: number): boolean {
    const m = this.messages.get(id)!;
    if (m.deliveries >= this.maxDeliveries) {
      this.kill(m, nowMs);
      return true;
    }
    m.state = "ready";
    m.dueAt = nowMs + delaySeconds * 1000;
    return false;
  }

  replayAll(nowMs: number): number {
    let n = 0;
    for (const m of this.messages.values()) {
      if (m.state !== "dead") continue;
      m.state = "ready";
      m.dueAt = nowMs;
      m.deliveries = 0;
      m.generation += 1;
      // A replayed message starts a new life; it may be dead-lettered once more.
      this.deadLettered.delete(m.id);
      n++;
    }
    return n;
  }

  counts(nowMs: number): { ready: number; delayed: number; leased: number; dead: number } {
    const c = { ready: 0, delayed: 0, leased: 0, dead: 0 };
    for (const m of this.messages.values()) {
      if (m.state === "ready") {
        if (m.dueAt > nowMs) c.delayed++;
        else c.ready++;
      } else c[m.state]++;
    }
    return c;
  }

  private kill(m: ModelMessage, nowMs: number): void {
    m.state = "dead";
    m.dueAt = nowMs;
    this.deadLettered.set(m.id, (this.deadLettered.get(m.id) ?? 0) + 1);
  }

  private sorted(): ModelMessage[] {
    return [...this.messages.values()].sort((a, b) => a.dueAt - b.dueAt || a.order - b.order);
  }
}

/** mulberry32: small, seedable, good enough to pick operations. */
export function prng(seed: number): { int: (n: number) => number; chance: (p: number) => boolean } {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296;
  };
  return { int: (n) => Math.floor(next() * n), chance: (p) => next() < p };
}
