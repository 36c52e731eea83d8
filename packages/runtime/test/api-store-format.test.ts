import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, test } from "vitest";
import { ApiKeyStore } from "../src/api/index.ts";
import { Catalog } from "../src/api/catalog.ts";
import { apiStoreFormatVersion } from "../src/api/store-format.ts";

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-api-format-"));
  dirs.push(dir);
  mkdirSync(join(dir, "api"));
  return dir;
}

function userVersion(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.pragma("user_version", { simple: true }) as number;
  } finally {
    db.close();
  }
}

const stores = [
  { file: "catalog.sqlite", open: (dir: string) => Catalog.open(dir) },
  { file: "keys.sqlite", open: (dir: string) => ApiKeyStore.open(dir) },
];

describe.each(stores)("api/$file's format version", ({ file, open }) => {
  test("a new file records this code's format", () => {
    const dir = dataDir();
    open(dir).close();
    expect(userVersion(join(dir, "api", file))).toBe(apiStoreFormatVersion);
  });

  test("a file from before the number was kept (0) opens as this layout and gets the number", () => {
    const dir = dataDir();
    open(dir).close();
    const db = new Database(join(dir, "api", file));
    db.pragma("user_version = 0");
    db.close();
    open(dir).close();
    expect(userVersion(join(dir, "api", file))).toBe(apiStoreFormatVersion);
  });

  test("a newer celld's file is refused, named, with nothing in it changed", () => {
    const dir = dataDir();
    const path = join(dir, "api", file);
    const db = new Database(path);
    db.pragma(`user_version = ${apiStoreFormatVersion + 1}`);
    db.close();
    const before = readFileSync(path);
    expect(() => open(dir)).toThrow(
      expect.objectContaining({
        code: "ERR_STORE_FORMAT_NEWER",
        message: `api/${file} is of format ${apiStoreFormatVersion + 1}, and this celld reads formats up to ${apiStoreFormatVersion}`,
      }),
    );
    expect(readFileSync(path).equals(before)).toBe(true);
  });
});
