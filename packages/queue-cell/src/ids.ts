import { randomFillSync } from "node:crypto";
import { crockford, ulidRandomChars, ulidTimeChars } from "./ulid-text.ts";

/** Fills a buffer with random bytes. Injected so a simulation can replay a seed exactly. */
export type RandomFill = (bytes: Uint8Array) => void;

/**
 * Monotonic ULIDs: 10 characters of millisecond time, then 16 of randomness (80 bits). Within one
 * millisecond (or if the clock steps back) the random part is incremented instead of redrawn, so
 * ids rise strictly in creation order. That keeps the cell's id index append-only: an ack of 100
 * messages then touches a few adjacent index pages, not 100 scattered ones.
 */
export class UlidSource {
  private readonly fill: RandomFill;
  private pool = new Uint8Array(0);
  private poolOffset = 0;
  private lastTimeMs = -1;
  private lastTime = "";
  private readonly random = new Uint8Array(ulidRandomChars);

  constructor(fill: RandomFill = (bytes) => randomFillSync(bytes)) {
    this.fill = fill;
  }

  next(nowMs: number): string {
    const t = Math.max(0, Math.floor(nowMs));
    if (t > this.lastTimeMs) {
      this.lastTimeMs = t;
      this.lastTime = encodeTime(t);
      this.draw();
    } else if (!this.increment()) {
      // 2^80 ids in one millisecond: move to the next millisecond rather than repeat an id.
      this.lastTimeMs += 1;
      this.lastTime = encodeTime(this.lastTimeMs);
      this.draw();
    }
    let random = "";
    for (let i = 0; i < ulidRandomChars; i++) random += crockford[this.random[i]!];
    return this.lastTime + random;
  }

  private draw(): void {
    if (this.poolOffset + ulidRandomChars > this.pool.length) {
      // Drawing randomness in blocks keeps a 100-message send to one syscall.
      this.pool = new Uint8Array(ulidRandomChars * 256);
      this.fill(this.pool);
      this.poolOffset = 0;
    }
    for (let i = 0; i < ulidRandomChars; i++) this.random[i] = this.pool[this.poolOffset + i]! & 31;
    // Leave headroom so increments within a millisecond rarely carry out of the top digit.
    this.random[0] = this.random[0]! & 15;
    this.poolOffset += ulidRandomChars;
  }

  private increment(): boolean {
    for (let i = ulidRandomChars - 1; i >= 0; i--) {
      if (this.random[i]! < 31) {
        this.random[i] = this.random[i]! + 1;
        return true;
      }
      this.random[i] = 0;
    }
    return false;
  }
}

function encodeTime(ms: number): string {
  let time = "";
  let t = ms;
  for (let i = 0; i < ulidTimeChars; i++) {
    time = crockford[t % 32] + time;
    t = Math.floor(t / 32);
  }
  return time;
}

/** A deterministic RandomFill for simulations and tests (mulberry32). */
export function seededRandomFill(seed: number): RandomFill {
  let state = seed >>> 0;
  return (bytes) => {
    for (let i = 0; i < bytes.length; i++) {
      state = (state + 0x6d2b79f5) >>> 0;
      let z = state;
      z = Math.imul(z ^ (z >>> 15), z | 1);
      z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
      bytes[i] = ((z ^ (z >>> 14)) >>> 0) & 0xff;
    }
  };
}

/** A queue id, `que_<cell><ulid>`: the cell's short code, then a ULID. */
export function newQueueId(cellCode: string, ids: UlidSource, nowMs: number): string {
  return `que_${cellCode}${ids.next(nowMs)}`;
}
