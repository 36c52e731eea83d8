import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { systemClock, type Clock } from "@celld/queue-cell";
import { apiLimits } from "./api-limits.ts";
import { ApiError } from "../wire/api-error.ts";
import { checkString } from "./fields.ts";
import { checkEnvName } from "./names.ts";
import { readApiStoreFormat, stampApiStoreFormat } from "./store-format.ts";

export const apiScopes = ["events:publish", "events:write", "events:read", "metrics:read", "workers:write", "workers:read"] as const;
export type ApiScope = (typeof apiScopes)[number];

export interface ApiKeyInfo {
  /** The public part of the key, `ck_<16 characters>`; the CLI revokes by it. */
  id: string;
  name: string;
  /** The environment the key is bound to: `orgs/{org}/projects/{project}/envs/{env}`. */
  env: string;
  scopes: ApiScope[];
  createdAt: number;
  revokedAt: number | null;
}

export interface CreatedApiKey {
  /** The whole key. Shown once; only its hash is kept. */
  key: string;
  info: ApiKeyInfo;
}

export interface CreateApiKeyInput {
  env: string;
  scopes: readonly string[];
  name?: string;
}

const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz";
const idChars = 16;
const secretBytes = 32;
// `ck_<id>_<secret>`: the id finds the row, the hash of the whole key proves it.
const secretChars = Math.ceil((secretBytes * 4) / 3);
const keyPattern = new RegExp(`^ck_([${idAlphabet}]{${idChars}})_([A-Za-z0-9_-]{${secretChars}})$`);

interface KeyRow {
  id: string;
  name: string;
  env: string;
  scopes: string;
  hash: Buffer;
  created_at: number;
  revoked_at: number | null;
}

/**
 * API keys, in `<dataDir>/api/keys.sqlite`. Only a SHA-256 of each key is stored, and a presented
 * key is compared with it in constant time. The CLI writes here and a running server reads every
 * request, so a key revoked from another process stops working at once.
 */
export class ApiKeyStore {
  private readonly db: Database.Database;
  private readonly clock: Clock;
  private readonly stmt;
  // Compared against when no row matches, so an unknown id costs what a known one does.
  private readonly decoyHash = createHash("sha256").update("celld decoy key").digest();

  private constructor(path: string, clock: Clock) {
    this.clock = clock;
    this.db = new Database(path);
    try {
      const version = readApiStoreFormat(this.db, "api/keys.sqlite");
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("synchronous = FULL");
      // Hashes only, but nobody else needs to read them.
      chmodSync(path, 0o600);
      this.db.exec(`CREATE TABLE IF NOT EXISTS api_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        env TEXT NOT NULL,
        scopes TEXT NOT NULL,
        hash BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) WITHOUT ROWID`);
      stampApiStoreFormat(this.db, version);
    } catch (error) {
      this.db.close();
      throw error;
    }
    this.stmt = {
      insert: this.db.prepare(
        "INSERT INTO api_keys (id, name, env, scopes, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)",
      ),
      byId: this.db.prepare("SELECT * FROM api_keys WHERE id = ?"),
      list: this.db.prepare("SELECT * FROM api_keys ORDER BY created_at, id"),
      revoke: this.db.prepare("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"),
    };
  }

  static open(dataDir: string, options: { clock?: Clock } = {}): ApiKeyStore {
    const dir = join(dataDir, "api");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return new ApiKeyStore(join(dir, "keys.sqlite"), options.clock ?? systemClock);
  }

  create(input: CreateApiKeyInput): CreatedApiKey {
    const env = checkEnvName("env", input.env);
    const scopes = checkScopes(input.scopes);
    const name = input.name === undefined ? "" : checkString("name", input.name, apiLimits.apiKeyNameCharsMax, 0);
    const idBytes = randomBytes(idChars);
    let id = "ck_";
    for (const byte of idBytes) id += idAlphabet[byte & 31];
    const key = `${id}_${randomBytes(secretBytes).toString("base64url")}`;
    const createdAt = this.clock.now();
    this.stmt.insert.run(id, name, env, scopes.join(" "), hashKey(key), createdAt);
    return { key, info: { id, name, env, scopes, createdAt, revokedAt: null } };
  }

  list(options: { includeRevoked?: boolean } = {}): ApiKeyInfo[] {
    const rows = this.stmt.list.all() as KeyRow[];
    return rows.filter((row) => options.includeRevoked === true || row.revoked_at === null).map(toInfo);
  }

  /** Revokes by id (`ck_...`); undefined when no such key exists. Revoking twice is harmless. */
  revoke(id: string): ApiKeyInfo | undefined {
    this.stmt.revoke.run(this.clock.now(), id);
    const row = this.stmt.byId.get(id) as KeyRow | undefined;
    return row === undefined ? undefined : toInfo(row);
  }

  /** The key's record if `key` is a live key, else undefined. */
  verify(key: string): ApiKeyInfo | undefined {
    const match = keyPattern.exec(key);
    const row = match === null ? undefined : (this.stmt.byId.get(`ck_${match[1]}`) as KeyRow | undefined);
    const presented = hashKey(key);
    const equal = timingSafeEqual(presented, row?.hash ?? this.decoyHash);
    if (row === undefined || !equal || row.revoked_at !== null) return undefined;
    return toInfo(row);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

function hashKey(key: string): Buffer {
  return createHash("sha256").update(key).digest();
}

function toInfo(row: KeyRow): ApiKeyInfo {
  return {
    id: row.id,
    name: row.name,
    env: row.env,
    scopes: row.scopes.split(" ") as ApiScope[],
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

function checkScopes(scopes: readonly string[]): ApiScope[] {
  const bound = `one or more of ${apiScopes.join(", ")}`;
  if (!Array.isArray(scopes) || scopes.length === 0) {
    throw new ApiError("invalid_argument", `scopes must name ${bound}`, { field: "scopes", bound });
  }
  const out = new Set<ApiScope>();
  for (const scope of scopes) {
    if (!(apiScopes as readonly string[]).includes(scope)) {
      throw new ApiError("invalid_argument", `unknown scope ${JSON.stringify(scope)}; scopes are ${apiScopes.join(", ")}`, {
        field: "scopes",
        bound,
      });
    }
    out.add(scope as ApiScope);
  }
  return apiScopes.filter((s) => out.has(s));
}

// ---- What the CLI calls: each opens the store, does one thing, and closes it. ----

export function createApiKey(dataDir: string, input: CreateApiKeyInput): CreatedApiKey {
  const store = ApiKeyStore.open(dataDir);
  try {
    return store.create(input);
  } finally {
    store.close();
  }
}

export function listApiKeys(dataDir: string, options: { includeRevoked?: boolean } = {}): ApiKeyInfo[] {
  const store = ApiKeyStore.open(dataDir);
  try {
    return store.list(options);
  } finally {
    store.close();
  }
}

export function revokeApiKey(dataDir: string, id: string): ApiKeyInfo | undefined {
  const store = ApiKeyStore.open(dataDir);
  try {
    return store.revoke(id);
  } finally {
    store.close();
  }
}

/** The table `celld keys list` prints; never a key, only ids. */
export function formatApiKeyTable(keys: readonly ApiKeyInfo[]): string {
  const header = ["ID", "NAME", "ENV", "SCOPES", "CREATED", "REVOKED"];
  const rows = keys.map((k) => [
    k.id,
    k.name === "" ? "-" : k.name,
    k.env,
    k.scopes.join(","),
    new Date(k.createdAt).toISOString(),
    k.revokedAt === null ? "-" : new Date(k.revokedAt).toISOString(),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n");
}
