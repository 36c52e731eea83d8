import { expect, test } from "vitest";
import { UlidSource, newQueueId, seededRandomFill } from "../src/index.ts";
import { ulidRun, ulidSuccessor } from "../src/ulid-text.ts";

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

test("ulidSuccessor gives the id a source gives next within one millisecond, and nothing past the top", () => {
  const ids = new UlidSource(seededRandomFill(3));
  let previous = ids.next(1_000);
  for (let i = 0; i < 2_000; i++) {
    const next = ids.next(1_000);
    expect(ulidSuccessor(previous)).toBe(next);
    previous = next;
  }
  const time = "01ARYZ6S41";
  expect(ulidSuccessor(time + "0000000000000000")).toBe(time + "0000000000000001");
  expect(ulidSuccessor(time + "000000000000000Z")).toBe(time + "0000000000000010");
  expect(ulidSuccessor(time + "0000000000000ZZZ")).toBe(time + "0000000000001000");
  expect(ulidSuccessor(time + "00000000000000HJ")).toBe(time + "00000000000000HK");
  // The random part at its top: a source moves to the next millisecond, which this cannot know.
  expect(ulidSuccessor(time + "ZZZZZZZZZZZZZZZZ")).toBeUndefined();
  // Not a ULID: the wrong length, or a character that is no Crockford digit where it is read.
  expect(ulidSuccessor(time + "000000000000000")).toBeUndefined();
  expect(ulidSuccessor(time + "000000000000000u")).toBeUndefined();
  expect(ulidSuccessor(time + "000000000000000I")).toBeUndefined();
  expect(ulidSuccessor("job-1")).toBeUndefined();
  // A run of them, and one cut short at the top.
  expect(ulidRun(time + "000000000000000Y", 3)).toEqual([time + "000000000000000Y", time + "000000000000000Z", time + "0000000000000010"]);
  expect(ulidRun(time + "ZZZZZZZZZZZZZZZY", 3)).toEqual([time + "ZZZZZZZZZZZZZZZY", time + "ZZZZZZZZZZZZZZZZ"]);
  expect(ulidRun("job-1", 2)).toEqual(["job-1"]);
});
