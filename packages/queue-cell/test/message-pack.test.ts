import { describe, expect, test } from "vitest";
import { CellError, UlidSource, seededRandomFill, type NewMessage } from "../src/index.ts";
import { canPack, decodePackEntries, encodePack, indexInPack, packMessagesMax, readPackList } from "../src/message-pack.ts";

const message = (id: string, extra: Partial<NewMessage> = {}): NewMessage => ({
  id,
  dueAt: 1_000,
  sentAt: 900,
  enqueuedAt: 1_000,
  contentType: "json",
  attributes: null,
  body: new TextEncoder().encode(id),
  ...extra,
});

describe("packs", () => {
  test("a send may be packed only when its messages are alike in time and their ids rise above the floor", () => {
    expect(canPack([message("a"), message("b")], "")).toBe(true);
    expect(canPack([message("a")], ""), "one message").toBe(false);
    expect(canPack([message("a"), message("b", { dueAt: 2_000 })], ""), "due apart").toBe(false);
    expect(canPack([message("a"), message("b", { enqueuedAt: 999 })], ""), "entered apart").toBe(false);
    expect(canPack([message("b"), message("a")], ""), "ids not rising").toBe(false);
    expect(canPack([message("a"), message("a")], ""), "an id twice").toBe(false);
    expect(canPack([message("b"), message("c")], "b"), "at the floor").toBe(false);
    expect(canPack([message("c"), message("d")], "b"), "above the floor").toBe(true);
    const ids = Array.from({ length: packMessagesMax + 1 }, (_, i) => `m${String(i).padStart(4, "0")}`);
    expect(canPack(ids.slice(0, packMessagesMax).map((id) => message(id)), "")).toBe(true);
    expect(canPack(ids.map((id) => message(id)), ""), "more than the largest send").toBe(false);
  });

  test("the list and the bodies read back as they went in, and an id is found by its place", () => {
    const rows = [message("a"), message("b", { attributes: '{"x":"ü"}', contentType: "v8", sentAt: 5 }), message("c", { body: new Uint8Array(0) })];
    const pack = encodePack(rows);
    expect(pack.bytes).toBe(1 + 1 + 10 + 0);
    expect([...pack.body]).toEqual([97, 98]);
    const list = decodePackEntries(pack.entries, pack.body.byteLength);
    expect(list).toEqual([
      ["a", 900, "json", null, 1, 1],
      ["b", 5, "v8", '{"x":"ü"}', 11, 1],
      ["c", 900, "json", null, 0, 0],
    ]);
    expect(["a", "b", "c", "0", "bb", "d"].map((id) => indexInPack(list, id))).toEqual([0, 1, 2, -1, -1, -1]);
  });

  test("a list that does not account for the bodies is a storage failure", () => {
    const pack = encodePack([message("a"), message("b")]);
    const read = () => decodePackEntries(pack.entries, pack.body.byteLength + 1);
    expect(read).toThrow(CellError);
    expect(read).toThrow(/a pack's bodies come to 3 bytes, not the 2 its list gives/);
  });
  describe("a list stored short", () => {
    // A send's messages as a cell makes them: ids from one source within one millisecond.
    const send = (n: number, extra: (i: number) => Partial<NewMessage> = () => ({})): NewMessage[] => {
      const ids = new UlidSource(seededRandomFill(7));
      return Array.from({ length: n }, (_, i) => message(ids.next(1_000), { body: new Uint8Array(i % 3), ...extra(i) }));
    };
    const full = (rows: readonly NewMessage[]) => rows.map((r) => [r.id, r.sentAt, r.contentType, r.attributes, r.body.byteLength + (r.attributes?.length ?? 0), r.body.byteLength]);

    test("a send's messages take a few bytes each, and read back as the full list would", () => {
      const rows = send(packMessagesMax);
      const pack = encodePack(rows);
      expect(pack.entries.length).toBeLessThan(packMessagesMax * 4 + 100);
      expect(decodePackEntries(pack.entries, pack.body.byteLength)).toEqual(full(rows));
      expect(readPackList(pack.entries)).toEqual(full(rows));
    });

    test.each([
      ["sent at different times", (i: number) => (i === 3 ? { sentAt: 5 } : {})],
      ["with different content types", (i: number) => (i === 3 ? { contentType: "text" } : {})],
      ["with attributes", (i: number) => (i === 0 ? { attributes: "{}" } : {})],
      ["with attributes after the first", (i: number) => (i === 3 ? { attributes: "{}" } : {})],
    ])("messages %s are stored in full, and read back", (_, extra) => {
      const rows = send(5, extra);
      const pack = encodePack(rows);
      expect(Array.isArray(JSON.parse(pack.entries))).toBe(true);
      expect(decodePackEntries(pack.entries, pack.body.byteLength)).toEqual(full(rows));
    });

    test("ids that do not follow one another one by one are stored in full", () => {
      const rows = send(6).filter((_, i) => i !== 2);
      const pack = encodePack(rows);
      expect(Array.isArray(JSON.parse(pack.entries))).toBe(true);
      expect(decodePackEntries(pack.entries, pack.body.byteLength)).toEqual(full(rows));
    });

    test("a damaged short list is a storage failure, not wrong ids or bodies", () => {
      const pack = encodePack(send(4));
      const list = JSON.parse(pack.entries) as { first: string; lengths: number[] };
      const damaged = (change: object) => JSON.stringify({ ...list, ...change });
      expect(() => decodePackEntries(damaged({ lengths: [...list.lengths, 1] }), pack.body.byteLength)).toThrow(/its list gives/);
      expect(() => readPackList(damaged({ first: 7 }))).toThrow(CellError);
      expect(() => readPackList(damaged({ first: "01ARYZ6S41ZZZZZZZZZZZZZZZY" }))).toThrow(/runs past the last id/);
    });
  });
});
