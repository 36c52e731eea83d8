import { describe, expect, test } from "vitest";
import { closestKey } from "../src/config/closest-key.ts";

const consumerKeys = [
  "queue",
  "max_batch_size",
  "max_batch_timeout",
  "max_retries",
  "dead_letter_queue",
  "max_concurrency",
  "retry_delay",
];

describe("closestKey: the key an unknown one was probably meant to be", () => {
  test("the same words in another case or separator", () => {
    expect(closestKey("maxBatchSize", consumerKeys)).toBe("max_batch_size");
    expect(closestKey("max-retries", consumerKeys)).toBe("max_retries");
    expect(closestKey("DEAD_LETTER_QUEUE", consumerKeys)).toBe("dead_letter_queue");
  });

  test("one or two edits away, a swap of neighbouring letters counting as one", () => {
    expect(closestKey("max_batch_timout", consumerKeys)).toBe("max_batch_timeout");
    expect(closestKey("max_retires", consumerKeys)).toBe("max_retries");
    expect(closestKey("mian", ["main", "name", "vars"])).toBe("main");
    expect(closestKey("retry_dealy", consumerKeys)).toBe("retry_delay");
  });

  test("short keys get one edit, longer ones two, and nothing further off is named", () => {
    expect(closestKey("quue", consumerKeys)).toBe("queue");
    expect(closestKey("mn", ["main"])).toBeUndefined();
    expect(closestKey("max_bach_siz", consumerKeys)).toBe("max_batch_size");
    expect(closestKey("max_bah_si", consumerKeys)).toBeUndefined();
    expect(closestKey("constructor", consumerKeys)).toBeUndefined();
    expect(closestKey("pullers", ["producers", "consumers"])).toBeUndefined();
  });

  test("two keys equally near: neither is named", () => {
    expect(closestKey("max_x", ["max_a", "max_b"])).toBeUndefined();
    expect(closestKey("a_b", ["ab", "a-b"])).toBeUndefined();
  });
});
