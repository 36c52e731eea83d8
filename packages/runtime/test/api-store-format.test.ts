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

// The catalog and key store as celld wrote them before the format number (c46ba4f and every
// commit to 76a471b): the schema copied from that commit's catalog.ts and api-keys.ts, the rows
// as `celld dev --api-port` and `celld keys create` wrote them there (read back with sqlite3).
// An upgrade must keep the queues, their settings, the subscriptions, and every key working.
const env = "orgs/acme/projects/shop/envs/prod";
const oldCatalogSql = `
CREATE TABLE queues (
  name TEXT PRIMARY KEY, env TEXT NOT NULL, queue TEXT NOT NULL, queue_id TEXT NOT NULL UNIQUE,
  origin TEXT NOT NULL, cell_name TEXT NOT NULL UNIQUE, settings TEXT, dead_letter_queue TEXT,
  create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX queues_by_env ON queues (env, queue);
CREATE INDEX queues_by_dead_letter_queue ON queues (dead_letter_queue);
CREATE TABLE subscriptions (
  name TEXT PRIMARY KEY, env TEXT NOT NULL, subscription TEXT NOT NULL, subscription_id TEXT NOT NULL UNIQUE,
  queue TEXT NOT NULL, types TEXT NOT NULL, sources TEXT NOT NULL, create_ms INTEGER NOT NULL, update_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX subscriptions_by_env ON subscriptions (env, subscription);
CREATE INDEX subscriptions_by_queue ON subscriptions (queue);
INSERT INTO queues VALUES ('${env}/queues/orders', '${env}', 'orders', 'que_64bwhz01M8TEGTR88K13J09X3X8SEQ6K', 'api',
  '${env}/queues/orders', '{"visibilityTimeout":60,"maxDeliveries":2,"deliveryDelay":0,"deadLetterQueue":null}', NULL,
  1796183976712, 1796183976712);
INSERT INTO subscriptions VALUES ('${env}/subscriptions/new-orders', '${env}', 'new-orders', 'sub_01M8TEGTVJAE78RP2XBX07MA1S',
  '${env}/queues/orders', '["order.*"]', '[]', 1796183976818, 1796183976818);
`;
const oldKeysSql = `
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, env TEXT NOT NULL, scopes TEXT NOT NULL, hash BLOB NOT NULL,
  created_at INTEGER NOT NULL, revoked_at INTEGER
) WITHOUT ROWID;
INSERT INTO api_keys VALUES ('ck_tfk8ancetxjb23c4', '', '${env}', 'events:publish events:write events:read',
  X'39d3cd220e6493d67cef6484e63aa4a8a44349e7ae95a40dc96f4ba7986f9c4d', 1796183971597, NULL);
`;
/** The key `celld keys create` printed for the row above (a throwaway key of a scratch directory). */
const oldKey = "ck_tfk8ancetxjb23c4_cng_2GyMBoE3rMwKA6otQaaMp-QpMamNOaydBKRsvDk";

function writeOld(dir: string, file: string, sql: string): void {
  const db = new Database(join(dir, "api", file));
  db.exec(sql);
  db.close();
}

describe("api stores written before the format number", () => {
  test("the catalog keeps its queues, their settings and its subscriptions", () => {
    const dir = dataDir();
    writeOld(dir, "catalog.sqlite", oldCatalogSql);
    const catalog = Catalog.open(dir);
    try {
      expect(catalog.getQueue(`${env}/queues/orders`)).toMatchObject({
        queue: "orders",
        queueId: "que_64bwhz01M8TEGTR88K13J09X3X8SEQ6K",
        origin: "api",
        settings: { visibilityTimeout: 60, maxDeliveries: 2, deliveryDelay: 0, deadLetterQueue: null },
        createMs: 1796183976712,
      });
      expect(catalog.envSubscriptions(env)).toEqual([
        expect.objectContaining({ subscription: "new-orders", queue: `${env}/queues/orders`, types: ["order.*"], sources: [] }),
      ]);
    } finally {
      catalog.close();
    }
    expect(userVersion(join(dir, "api", "catalog.sqlite"))).toBe(apiStoreFormatVersion);
  });

  test("a key created then still authenticates, with its environment and scopes", () => {
    const dir = dataDir();
    writeOld(dir, "keys.sqlite", oldKeysSql);
    const keys = ApiKeyStore.open(dir);
    try {
      expect(keys.verify(oldKey)).toMatchObject({ id: "ck_tfk8ancetxjb23c4", env, scopes: ["events:publish", "events:write", "events:read"] });
      expect(keys.verify(`${oldKey.slice(0, -1)}x`)).toBeUndefined();
    } finally {
      keys.close();
    }
    expect(userVersion(join(dir, "api", "keys.sqlite"))).toBe(apiStoreFormatVersion);
  });
});
