import { describe, expect, test } from "vitest";
import { CellError, type NewMessage } from "../src/index.ts";
import { canPack, decodePackEntries, encodePack, indexInPack, packMessagesMax } from "../src/message-pack.ts";

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
});
