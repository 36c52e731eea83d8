import { randomFillSync } from "node:crypto";

/** Fills a buffer with random bytes. Injected so a simulation can replay a seed exactly. */
export type RandomFill = (bytes: Uint8Array) => void;

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const timeChars = 10;
const randomChars = 16;
const ulidChars = timeChars + randomChars;

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
  private readonly random = new Uint8Array(randomChars);

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
    for (let i = 0; i < randomChars; i++) random += crockford[this.random[i]!];
    return this.lastTime + random;
  }

  private draw(): void {
    if (this.poolOffset + randomChars > this.pool.length) {
      // Drawing randomness in blocks keeps a 100-message send to one syscall.
      this.pool = new Uint8Array(randomChars * 256);
      this.fill(this.pool);
      this.poolOffset = 0;
    }
    for (let i = 0; i < randomChars; i++) this.random[i] = this.pool[this.poolOffset + i]! & 31;
    // Leave headroom so increments within a millisecond rarely carry out of the top digit.
    this.random[0] = this.random[0]! & 15;
    this.poolOffset += randomChars;
  }

  private increment(): boolean {
    for (let i = randomChars - 1; i >= 0; i--) {
      if (this.random[i]! < 31) {
        this.random[i] = this.random[i]! + 1;
        return true;
      }
      this.random[i] = 0;
    }
    return false;
  }
}

/**
 * The id a UlidSource gives after `id` within the same millisecond: `id` with its random part (the
 * last 16 characters, a base-32 number in Crockford's upper case) one higher. Undefined when `id`
 * is not 26 characters long, a character read is not such a digit, or the random part is at its
 * top (a source then moves on to the next millisecond). The store keeps a send's ids as the first
 * of them and this rule (see message-pack.ts).
 */
export function ulidSuccessor(id: string): string | undefined {
  if (id.length !== ulidChars) return undefined;
  for (let i = ulidChars - 1; i >= ulidChars - randomChars; i--) {
    const digit = crockford.indexOf(id[i]!);
    if (digit < 0) return undefined;
    if (digit < 31) return id.slice(0, i) + crockford[digit + 1]! + "0".repeat(ulidChars - 1 - i);
  }
  return undefined;
}

function encodeTime(ms: number): string {
  let time = "";
  let t = ms;
  for (let i = 0; i < timeChars; i++) {
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
