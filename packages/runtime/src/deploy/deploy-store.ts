import { randomUUID } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { systemClock, type Clock } from "@celld/queue-cell";
import { AssetUploads, type AssetManifest } from "./asset-uploads.ts";
import { replaceFile, syncDir, writeSynced } from "./atomic-file.ts";
import { DeployError } from "./deploy-errors.ts";
import { checkModuleName, checkScriptName, checkVersionId } from "./deploy-names.ts";
import type { UploadBinding } from "./upload-metadata.ts";

/**
 * What has been deployed to a `celld serve` data directory, under `<dataDir>/deploy/`:
 *
 *   scripts/<name>/versions/<version id>/version.json   each upload, written once, never changed
 *   scripts/<name>/versions/<version id>/modules/...    its modules, as uploaded
 *   scripts/<name>/versions/<version id>/assets/...     its static assets, by path (wrangler's [assets])
 *   assets/<hash>                                       uploaded asset files, kept for later uploads
 *   scripts/<name>/deployments/<n>-<id>.json            each deployment, written once
 *   scripts/<name>/active.json                          the deployment that runs, replaced whole
 *   scripts/<name>/settings.json                        schedules, workers.dev, routes, custom domains
 *   scripts/<name>/secrets.json                         0600, values never logged or returned
 *
 * A version's directory is written under another name and renamed into place, and active.json is
 * replaced by rename (atomic-file.ts): a crash leaves the old deployment or the new one, whole.
 * Rollback is a new deployment record and a new active.json pointing at an older version.
 * One process owns the data directory (the host's lock), so the store need not lock files; calls
 * for one Worker must not interleave, which the deploy service sees to.
 */

export interface StoredModule {
  /** Its name in the upload, which is the name its importers use (`./<hash>-hello.txt` kept as `<hash>-hello.txt`). */
  name: string;
  /** The part's content type: `application/javascript+module`, `text/plain`, `application/wasm`, ... */
  contentType: string;
}

export interface ClassRecord {
  className: string;
  storage: "sqlite" | "kv";
}

export interface VersionRecord {
  id: string;
  /** 1 for the Worker's first version, then one more for each upload. */
  number: number;
  script: string;
  createdOn: string;
  /** `workers/message`, `workers/tag`, `workers/triggered_by` (upload, secret, rollback, ...). */
  annotations: Record<string, string>;
  mainModule: string;
  modules: StoredModule[];
  compatibilityDate: string;
  compatibilityFlags: string[];
  /** The bindings as uploaded, `inherit` resolved; secret values are never here (secrets.json). */
  bindings: UploadBinding[];
  /** The Durable Object classes the Worker's migrations leave after this upload. */
  durableObjectClasses: ClassRecord[];
  /** The last migration tag applied, after this upload. */
  migrationTag: string | undefined;
  /** Its static assets (absent: none): their manifest (path -> hash, size), and how they are served. */
  assets?: { files: number; manifest: AssetManifest; config: AssetsServing };
}

/** `metadata.assets.config` as celld serves it. */
export interface AssetsServing {
  html_handling?: "auto-trailing-slash" | "force-trailing-slash" | "drop-trailing-slash" | "none";
  not_found_handling?: "single-page-application" | "404-page" | "none";
  run_worker_first?: boolean | string[];
}

export interface DeploymentRecord {
  id: string;
  /** Orders deployments: 1, 2, ... per Worker. */
  sequence: number;
  createdOn: string;
  source: string;
  strategy: "percentage";
  versions: { version_id: string; percentage: number }[];
  annotations: Record<string, string>;
}

export interface ScriptSettings {
  /** `PUT .../schedules`: the cron expressions, replaced whole. */
  schedules: string[];
  /** `POST .../subdomain`: whether `<name>.<workers.dev domain>` reaches it. */
  workersDev: boolean;
  /** `PUT .../routes`: route patterns, replaced whole. */
  routes: string[];
  /** `PUT .../domains/records`: custom domains (whole host names), replaced whole. */
  customDomains: string[];
  createdOn: string;
  modifiedOn: string;
}

export interface NewVersion {
  modules: { name: string; contentType: string; bytes: Uint8Array }[];
  mainModule: string;
  annotations: Record<string, string>;
  compatibilityDate: string;
  compatibilityFlags: string[];
  bindings: UploadBinding[];
  durableObjectClasses: ClassRecord[];
  migrationTag: string | undefined;
  /** The files of its assets upload (its completion token's manifest), copied into the version. */
  assets?: { manifest: AssetManifest; config: AssetsServing };
}

export interface DeployStoreOptions {
  clock?: Clock;
  newId?: () => string;
}

export class DeployStore {
  private readonly root: string;
  private readonly clock: Clock;
  private readonly newId: () => string;
  /** Assets uploads in progress and the files they brought. */
  readonly assetUploads: AssetUploads;

  constructor(dataDir: string, options: DeployStoreOptions = {}) {
    this.root = join(dataDir, "deploy", "scripts");
    this.assetUploads = new AssetUploads(dataDir);
    this.clock = options.clock ?? systemClock;
    this.newId = options.newId ?? randomUUID;
    mkdirSync(this.root, { recursive: true });
    // What a crash left half-written or half-deleted is no part of any Worker: no reader lists it.
    for (const name of readdirSync(this.root)) {
      if (name.startsWith(".deleted-")) rmSync(join(this.root, name), { recursive: true, force: true });
    }
  }

  /** The Workers that have a deployment, sorted by name. */
  scripts(): string[] {
    return readdirSync(this.root)
      .filter((name) => !name.startsWith(".") && existsSync(join(this.root, name, "active.json")))
      .sort();
  }

  /** Whether the Worker exists here (it has at least one version). */
  has(script: string): boolean {
    checkScriptName(script);
    return existsSync(join(this.scriptDir(script), "versions"));
  }

  /** Stores an upload as a new version; nothing runs it until a deployment names it. */
  addVersion(script: string, input: NewVersion): VersionRecord {
    checkScriptName(script);
    const versionsDir = join(this.scriptDir(script), "versions");
    const id = this.newId();
    checkVersionId(id);
    const record: VersionRecord = {
      id,
      number: this.versions(script).reduce((n, v) => Math.max(n, v.number), 0) + 1,
      script,
      createdOn: new Date(this.clock.now()).toISOString(),
      annotations: input.annotations,
      mainModule: checkModuleName(input.mainModule),
      modules: input.modules.map((m) => ({ name: checkModuleName(m.name), contentType: m.contentType })),
      compatibilityDate: input.compatibilityDate,
      compatibilityFlags: input.compatibilityFlags,
      bindings: input.bindings,
      durableObjectClasses: input.durableObjectClasses,
      migrationTag: input.migrationTag,
      ...(input.assets === undefined ? {} : { assets: { files: Object.keys(input.assets.manifest).length, manifest: input.assets.manifest, config: input.assets.config } }),
    };
    mkdirSync(versionsDir, { recursive: true });
    // Written whole under a name no reader lists, then renamed into place.
    const temp = join(versionsDir, `.tmp-${id}`);
    try {
      for (const module of input.modules) {
        const path = join(temp, "modules", checkModuleName(module.name));
        mkdirSync(dirname(path), { recursive: true });
        writeSynced(path, module.bytes);
      }
      mkdirSync(temp, { recursive: true });
      if (input.assets !== undefined) this.copyAssets(input.assets.manifest, join(temp, "assets"));
      writeSynced(join(temp, "version.json"), JSON.stringify(record, null, 2));
      syncDir(temp);
      renameSync(temp, join(versionsDir, id));
    } catch (error) {
      rmSync(temp, { recursive: true, force: true });
      throw error;
    }
    syncDir(versionsDir);
    return record;
  }

  /**
   * Removes a version no deployment names: an upload whose Worker could not start. Nothing else
   * ever changes a stored version.
   */
  discardVersion(script: string, id: string): void {
    checkVersionId(id);
    if (this.deployments(script).some((d) => d.versions.some((v) => v.version_id === id))) {
      throw new Error(`version ${id} of Worker "${script}" is deployed and cannot be discarded`);
    }
    const versionsDir = join(this.scriptDir(script), "versions");
    const trash = join(versionsDir, `.discarded-${id}`);
    renameSync(join(versionsDir, id), trash);
    syncDir(versionsDir);
    rmSync(trash, { recursive: true, force: true });
    if (readdirSync(versionsDir).length === 0) rmSync(versionsDir, { recursive: true, force: true });
  }

  version(script: string, id: string): VersionRecord {
    checkScriptName(script);
    checkVersionId(id);
    const path = join(this.scriptDir(script), "versions", id, "version.json");
    if (!existsSync(path)) throw new DeployError("version_not_found", `Worker "${script}" has no version "${id}"`);
    return JSON.parse(readFileSync(path, "utf8")) as VersionRecord;
  }

  /** Newest first. */
  versions(script: string): VersionRecord[] {
    checkScriptName(script);
    const dir = join(this.scriptDir(script), "versions");
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((name) => !name.startsWith("."))
      .map((id) => this.version(script, id))
      .sort((a, b) => b.number - a.number);
  }

  /** The directory of a version's static assets (present when its record has `assets`). */
  assetsDir(script: string, id: string): string {
    return join(this.modulesDir(script, id), "..", "assets");
  }

  /** Each version has its own copy: a later upload of the same path leaves older versions' files whole. */
  private copyAssets(manifest: AssetManifest, dir: string): void {
    mkdirSync(dir, { recursive: true });
    for (const [path, { hash }] of Object.entries(manifest)) {
      const source = this.assetUploads.blobPath(hash);
      if (!existsSync(source)) throw new DeployError("invalid_upload", `asset ${path} (hash ${hash}) was never uploaded`);
      const target = join(dir, ...path.slice(1).split("/"));
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(source, target);
    }
  }

  /** The directory of a version's modules: `main` and the modules it imports, by their names. */
  modulesDir(script: string, id: string): string {
    checkScriptName(script);
    checkVersionId(id);
    return join(this.scriptDir(script), "versions", id, "modules");
  }

  /**
   * Makes one version the Worker's whole traffic: writes the deployment's record, then points
   * active.json at it (the step that takes effect).
   */
  deploy(script: string, versionId: string, details: { annotations?: Record<string, string>; source?: string } = {}): DeploymentRecord {
    this.version(script, versionId);
    const dir = join(this.scriptDir(script), "deployments");
    mkdirSync(dir, { recursive: true });
    const sequence = this.deployments(script).reduce((n, d) => Math.max(n, d.sequence), 0) + 1;
    const record: DeploymentRecord = {
      id: this.newId(),
      sequence,
      createdOn: new Date(this.clock.now()).toISOString(),
      source: details.source ?? "wrangler",
      strategy: "percentage",
      versions: [{ version_id: versionId, percentage: 100 }],
      annotations: details.annotations ?? {},
    };
    const file = `${String(sequence).padStart(8, "0")}-${record.id}.json`;
    writeSynced(join(dir, file), JSON.stringify(record, null, 2));
    syncDir(dir);
    replaceFile(join(this.scriptDir(script), "active.json"), JSON.stringify({ deployment: file }));
    return record;
  }

  /** Newest first. */
  deployments(script: string): DeploymentRecord[] {
    checkScriptName(script);
    const dir = join(this.scriptDir(script), "deployments");
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((name) => name.endsWith(".json") && !name.startsWith("."))
      .map((name) => JSON.parse(readFileSync(join(dir, name), "utf8")) as DeploymentRecord)
      .sort((a, b) => b.sequence - a.sequence);
  }

  /** The deployment that runs and its version; undefined for a Worker never deployed. */
  active(script: string): { deployment: DeploymentRecord; version: VersionRecord } | undefined {
    checkScriptName(script);
    const pointer = join(this.scriptDir(script), "active.json");
    if (!existsSync(pointer)) return undefined;
    const { deployment: file } = JSON.parse(readFileSync(pointer, "utf8")) as { deployment: string };
    const deployment = JSON.parse(readFileSync(join(this.scriptDir(script), "deployments", file), "utf8")) as DeploymentRecord;
    const versionId = deployment.versions[0]?.version_id;
    if (versionId === undefined) throw new Error(`deployment ${deployment.id} of Worker "${script}" names no version`);
    return { deployment, version: this.version(script, versionId) };
  }

  settings(script: string): ScriptSettings {
    checkScriptName(script);
    const path = join(this.scriptDir(script), "settings.json");
    const now = new Date(this.clock.now()).toISOString();
    const defaults: ScriptSettings = { schedules: [], workersDev: true, routes: [], customDomains: [], createdOn: now, modifiedOn: now };
    // A settings file written before routes and custom domains were kept has neither.
    if (existsSync(path)) return { ...defaults, ...(JSON.parse(readFileSync(path, "utf8")) as Partial<ScriptSettings>) };
    return defaults;
  }

  updateSettings(script: string, change: Partial<Pick<ScriptSettings, "schedules" | "workersDev" | "routes" | "customDomains">>): ScriptSettings {
    const settings = { ...this.settings(script), ...change, modifiedOn: new Date(this.clock.now()).toISOString() };
    mkdirSync(this.scriptDir(script), { recursive: true });
    replaceFile(join(this.scriptDir(script), "settings.json"), JSON.stringify(settings, null, 2));
    return settings;
  }

  /** The names of the Worker's secrets, sorted; never their values. */
  secretNames(script: string): string[] {
    return Object.keys(this.secretValues(script)).sort();
  }

  /** For the host that runs the Worker, and nothing else: never log or return these. */
  secretValues(script: string): Record<string, string> {
    checkScriptName(script);
    const path = join(this.scriptDir(script), "secrets.json");
    if (!existsSync(path)) return {};
    return Object.fromEntries(Object.entries(JSON.parse(readFileSync(path, "utf8")) as Record<string, string>));
  }

  putSecrets(script: string, values: Record<string, string>): void {
    if (Object.keys(values).length === 0) return;
    this.writeSecrets(script, { ...this.secretValues(script), ...values });
  }

  /** Whether there was such a secret. */
  deleteSecret(script: string, name: string): boolean {
    const values = this.secretValues(script);
    if (!Object.hasOwn(values, name)) return false;
    delete values[name];
    this.writeSecrets(script, values);
    return true;
  }

  /**
   * Removes the Worker whole: its directory is renamed out of the listing first, so a crash
   * midway leaves either the whole Worker or none of it.
   */
  deleteScript(script: string): boolean {
    checkScriptName(script);
    const dir = this.scriptDir(script);
    if (!existsSync(dir)) return false;
    const trash = join(this.root, `.deleted-${script}-${this.newId()}`);
    renameSync(dir, trash);
    syncDir(this.root);
    rmSync(trash, { recursive: true, force: true });
    return true;
  }

  private writeSecrets(script: string, values: Record<string, string>): void {
    const dir = this.scriptDir(script);
    mkdirSync(dir, { recursive: true });
    const path = join(dir, "secrets.json");
    replaceFile(path, JSON.stringify(values), 0o600);
    // A file from before (or a umask that widened it) is narrowed too.
    if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  }

  private scriptDir(script: string): string {
    return join(this.root, script);
  }
}
