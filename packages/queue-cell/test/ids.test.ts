import { expect, test } from "vitest";
import { UlidSource, newQueueId, seededRandomFill } from "../src/index.ts";

const ulid = /^[0-9A-HJKMNP-TV-Z]{26}$/;

test("ids rise strictly within one millisecond, across milliseconds, and when the clock steps back", () => {
  const ids = new UlidSource(seededRandomFill(1));
  const seen: string[] = [];
  for (let i = 0; i < 1000; i++) seen.push(ids.next(1_000));
  seen.push(ids.next(2_000), ids.next(1_500), ids.next(2_000));
  for (const id of seen) expect(id).toMatch(ulid);
  for (let i = 1; i < seen.length; i++) expect(seen[i]! > seen[i - 1]!).toBe(true);
  expect(new Set(seen).size).toBe(seen.length);
});

test("the time prefix encodes the millisecond as the ULID spec does", () => {
  // The example from the ULID specification.
  expect(new UlidSource(seededRandomFill(2)).next(1_469_918_176_385).slice(0, 10)).toBe("01ARYZ6S41");
});

test("queue ids have the form que_<cell><ulid>", () => {
  const id = newQueueId("c1", new UlidSource(seededRandomFill(4)), 1_000);
  expect(id).toMatch(/^que_c1[0-9A-HJKMNP-TV-Z]{26}$/);
});
