import { randomFillSync } from "node:crypto";

/** Fills a buffer with random bytes. Injected so a simulation can replay a seed exactly. */
export type RandomFill = (bytes: Uint8Array) => void;

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const randomChars = 16;

/**
 * ULIDs: 10 characters of millisecond time, then 16 of randomness (80 bits). They sort by creation
 * time, which keeps the id index append-mostly.
 */
export class UlidSource {
  private readonly fill: RandomFill;
  private pool = new Uint8Array(0);
  private poolOffset = 0;

  constructor(fill: RandomFill = (bytes) => randomFillSync(bytes)) {
    this.fill = fill;
  }

  next(nowMs: number): string {
    let time = "";
    let t = Math.max(0, Math.floor(nowMs));
    for (let i = 0; i < 10; i++) {
      time = crockford[t % 32] + time;
      t = Math.floor(t / 32);
    }
    if (this.poolOffset + randomChars > this.pool.length) {
      // Drawing randomness in blocks keeps a 100-message send to one syscall.
      this.pool = new Uint8Array(randomChars * 256);
      this.fill(this.pool);
      this.poolOffset = 0;
    }
    let random = "";
    for (let i = 0; i < randomChars; i++) random += crockford[this.pool[this.poolOffset + i]! & 31];
    this.poolOffset += randomChars;
    return time + random;
  }
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
