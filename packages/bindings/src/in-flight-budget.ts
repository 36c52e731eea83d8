/**
 * Message bytes in consumer batches that have been leased and not yet settled, shared by every
 * consumer of a host. All of one consumer's batches run in one workerd isolate, and Node holds
 * each batch's bodies until it is settled: at max_concurrency 250 and 100 messages of 128 KB a
 * batch, a backlog would put 3.2 GB in both at once. A consumer takes a further batch only while
 * the bytes in flight are under the budget, or when it has none running (so no consumer waits on
 * another's batches for ever). With a backlog a consumer may lease several full batches at once,
 * but only as many as the budget has room for, judged by its last batch's bytes a message. One
 * batch is at most 100 x 128 KB, so a consumer overshoots the budget by about one batch (by more
 * only when its messages grow sharply from one batch to the next).
 */
export class InFlightBudget {
  private used = 0;
  private waiting: Array<() => void> = [];

  constructor(readonly maxBytes: number) {
    if (!(Number.isSafeInteger(maxBytes) && maxBytes > 0)) {
      throw new RangeError(`an in-flight budget must be a positive whole number of bytes, got ${maxBytes}`);
    }
  }

  /** Bytes taken and not given back. */
  get bytes(): number {
    return this.used;
  }

  get full(): boolean {
    return this.used >= this.maxBytes;
  }

  take(bytes: number): void {
    this.used += bytes;
  }

  give(bytes: number): void {
    this.used -= bytes;
    if (this.full) return;
    const waiting = this.waiting;
    this.waiting = [];
    for (const wake of waiting) wake();
  }

  /** Calls `wake` once the budget next has room (at once, if it has room now). */
  whenRoom(wake: () => void): void {
    if (this.full) this.waiting.push(wake);
    else wake();
  }
}
