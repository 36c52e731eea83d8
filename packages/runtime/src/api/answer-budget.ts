import type { ServerResponse } from "node:http";
import { ApiError } from "../wire/api-error.ts";
import { apiLimits } from "./api-limits.ts";

/**
 * The bytes of answers written that their clients have not taken yet, server-wide. Node holds an
 * answer the socket cannot take in memory until the client reads it or the idle timeout closes
 * the connection; one lease or dead-letter page can be 16 MB, so without a bound many clients
 * that ask and do not read could hold gigabytes. Calls whose answers can be that large are refused
 * while the budget is spent: before they do any work, and again once their answer is built, since
 * many may pass the first check together (a long poll waits after it).
 */
export class AnswerBudget {
  private pending = 0;

  constructor(readonly bytesMax: number) {}

  get bytesPending(): number {
    return this.pending;
  }

  /**
   * Throws `unavailable` while the budget is spent. An answer let through while it is not may
   * take it past the bound by that answer's own size, so what is held stays under the bound plus
   * one answer: an answer is never refused for being larger than the room left, which would
   * refuse a lease of 100 large messages for good under a small bound.
   */
  checkRoom(): void {
    if (this.pending >= this.bytesMax) throw this.full();
  }

  /** Counts `bytes` written to `res` until the connection has taken them, or has closed. */
  track(res: ServerResponse, bytes: number): void {
    this.pending += bytes;
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      this.pending -= bytes;
      res.off("finish", settle);
      res.off("close", settle);
    };
    res.on("finish", settle);
    res.on("close", settle);
  }

  private full(): ApiError {
    const bound = `at most ${this.bytesMax} bytes of answers not yet read by their clients, server-wide`;
    return new ApiError(
      "unavailable",
      `the server holds ${this.pending} bytes of answers its clients have not read yet, and takes no call whose answer can be large (a lease, a dead-letter page, a list of subscriptions, a publish) until they are read or their connections close (${bound}); nothing of this call was done`,
      { bound, retryAfterSeconds: apiLimits.retryAfterSeconds },
    );
  }
}
