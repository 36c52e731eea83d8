import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import type { ApiKeyInfo } from "../api/api-keys.ts";
import { writeSynced } from "./atomic-file.ts";
import { DeployError } from "./deploy-errors.ts";

/**
 * wrangler's static assets upload (CLOUDFLARE-API-MAP.md; wrangler's `syncAssets`): it sends the
 * manifest (path -> hash, size) to `assets-upload-session`, gets back the hashes this host lacks
 * in buckets and a session token, posts each bucket's files (base64) to `workers/assets/upload`
 * with that token as its Bearer, and the last upload answers a completion token, which the script
 * upload names in `metadata.assets.jwt`. Files are kept by hash under `<dataDir>/deploy/assets/`,
 * so a second deploy uploads only what changed. Sessions live in memory: a restart in the middle
 * of an upload makes wrangler's deploy fail, and the next one starts over.
 */

export type AssetManifest = Record<string, { hash: string; size: number }>;

/** Bounds as Cloudflare's: 25 MiB a file, 20,000 files a Worker. */
export const assetLimits = { fileBytesMax: 25 * 1024 * 1024, filesMax: 20_000, bucketFilesMax: 50, openSessionsMax: 100 } as const;

const hashPattern = /^[0-9a-f]{32}$/;

interface Session {
  script: string;
  key: ApiKeyInfo;
  manifest: AssetManifest;
  missing: Set<string>;
}

export class AssetUploads {
  private readonly blobs: string;
  private readonly sessions = new Map<string, Session>();
  private readonly completions = new Map<string, { script: string; manifest: AssetManifest }>();

  constructor(dataDir: string) {
    this.blobs = join(dataDir, "deploy", "assets");
    mkdirSync(this.blobs, { recursive: true });
  }

  /** The stored file of a hash (absent until uploaded). */
  blobPath(hash: string): string {
    if (!hashPattern.test(hash)) throw new DeployError("invalid_upload", `asset hash ${JSON.stringify(hash)} is not 32 hex digits`);
    return join(this.blobs, hash);
  }

  /** `POST .../assets-upload-session`: the buckets of hashes to upload, and the token to upload them with. */
  openSession(script: string, key: ApiKeyInfo, body: unknown): { jwt: string; buckets: string[][] } {
    const manifest = checkManifest(body);
    const missing = new Set(Object.values(manifest).map((e) => e.hash).filter((hash) => !existsSync(this.blobPath(hash))));
    if (missing.size === 0) {
      // Nothing to upload: wrangler takes this token as the completion token.
      return { jwt: this.complete(script, manifest), buckets: [] };
    }
    if (this.sessions.size >= assetLimits.openSessionsMax) this.sessions.delete(this.sessions.keys().next().value!);
    const jwt = newToken();
    this.sessions.set(jwt, { script, key, manifest, missing });
    const hashes = [...missing];
    const buckets: string[][] = [];
    for (let i = 0; i < hashes.length; i += assetLimits.bucketFilesMax) buckets.push(hashes.slice(i, i + assetLimits.bucketFilesMax));
    return { jwt, buckets };
  }

  /** The key that opened the session the Bearer token names: the upload acts as it. */
  sessionKey(authorization: string | undefined): ApiKeyInfo {
    return this.session(authorization).key;
  }

  /** `POST /workers/assets/upload?base64=true`: one bucket's files; the last answers the completion token. */
  async upload(authorization: string | undefined, body: Uint8Array, contentType: string | undefined): Promise<{ jwt?: string }> {
    const session = this.session(authorization);
    let form: FormData;
    try {
      form = await new Response(body, { headers: { "content-type": contentType ?? "" } }).formData();
    } catch (error) {
      throw new DeployError("invalid_upload", `the assets upload is not readable multipart/form-data (${(error as Error).message})`);
    }
    for (const [hash, value] of form) {
      if (!session.missing.has(hash)) throw new DeployError("invalid_upload", `asset part "${hash}" is not a hash this upload session asked for`);
      const text = typeof value === "string" ? value : await value.text();
      const bytes = Buffer.from(text, "base64");
      const path = this.blobPath(hash);
      const temp = `${path}.tmp-${newToken().slice(0, 8)}`;
      writeSynced(temp, bytes);
      renameSync(temp, path);
      session.missing.delete(hash);
    }
    if (session.missing.size > 0) return {};
    this.sessions.delete(bearer(authorization));
    return { jwt: this.complete(session.script, session.manifest) };
  }

  /** The manifest a completion token stands for; each token is taken once, by the Worker it was made for. */
  takeCompletion(script: string, jwt: unknown): AssetManifest {
    const completion = typeof jwt === "string" ? this.completions.get(jwt) : undefined;
    if (completion === undefined || completion.script !== script) {
      throw new DeployError("invalid_upload", "metadata.assets.jwt is not a completion token of an assets upload to this Worker on this celld (upload the assets again)");
    }
    this.completions.delete(jwt as string);
    return completion.manifest;
  }

  private complete(script: string, manifest: AssetManifest): string {
    // A token wrangler never used (its deploy failed after the upload) goes when too many wait.
    if (this.completions.size >= assetLimits.openSessionsMax) this.completions.delete(this.completions.keys().next().value!);
    const jwt = newToken();
    this.completions.set(jwt, { script, manifest });
    return jwt;
  }

  private session(authorization: string | undefined): Session {
    const session = this.sessions.get(bearer(authorization));
    if (session === undefined) throw new DeployError("invalid_upload", "the assets upload's Bearer token names no open upload session (open one with assets-upload-session)");
    return session;
  }
}

function bearer(authorization: string | undefined): string {
  return /^Bearer\s+(\S+)$/i.exec(authorization ?? "")?.[1] ?? "";
}

function newToken(): string {
  return randomBytes(24).toString("base64url");
}

function checkManifest(body: unknown): AssetManifest {
  const manifest = (body as { manifest?: unknown } | null)?.manifest;
  if (typeof manifest !== "object" || manifest === null || Array.isArray(manifest)) {
    throw new DeployError("invalid_upload", "manifest must be an object of asset paths to {hash, size}");
  }
  const entries = Object.entries(manifest as Record<string, unknown>);
  if (entries.length > assetLimits.filesMax) throw new DeployError("invalid_upload", `manifest has ${entries.length} files, over the bound of ${assetLimits.filesMax}`);
  const checked: AssetManifest = {};
  for (const [path, entry] of entries) {
    const { hash, size } = (entry ?? {}) as { hash?: unknown; size?: unknown };
    if (!path.startsWith("/") || path.split("/").some((part) => part === ".." || part === ".") || path.includes("\\") || path.includes("\0")) {
      throw new DeployError("invalid_upload", `manifest path ${JSON.stringify(path)} must start with / and hold no . or .. segment`);
    }
    if (typeof hash !== "string" || !hashPattern.test(hash)) throw new DeployError("invalid_upload", `manifest["${path}"].hash must be 32 hex digits`);
    if (typeof size !== "number" || !Number.isInteger(size) || size < 0 || size > assetLimits.fileBytesMax) {
      throw new DeployError("invalid_upload", `manifest["${path}"].size must be an integer from 0 to ${assetLimits.fileBytesMax}`);
    }
    checked[path] = { hash, size };
  }
  return checked;
}
