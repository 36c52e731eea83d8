import type { ConsumerConfig, WorkerConfig } from "../config/index.ts";
import { DeployError } from "./deploy-errors.ts";
import { deployLimits } from "./deploy-limits.ts";
import type { AssetsServing, DeploymentRecord, DeployStore, NewVersion, ScriptSettings, VersionRecord } from "./deploy-store.ts";
import { parseUploadForm, type ParsedUpload } from "./upload-form.ts";
import { applyUploadMigrations, isKnownBinding, type KnownBinding, type UploadBinding, type UploadMetadata } from "./upload-metadata.ts";
import { versionWorker } from "./version-worker.ts";

/**
 * Runs a set of Workers in place of those running. Throws a DeployError (invalid_upload) when
 * they cannot start, and then what ran before still runs.
 */
export interface WorkersRuntime {
  run(workers: WorkerConfig[]): Promise<void>;
  /** Throws a DeployError (invalid_upload) if these Workers could not start; runs nothing. */
  check(workers: WorkerConfig[]): Promise<void>;
}

export interface UploadOptions {
  /** `PUT .../scripts/:name` deploys the upload at once; `POST .../versions` only stores it. */
  deploy: boolean;
  annotations: Record<string, string>;
}

export interface UploadResult {
  version: VersionRecord;
  deployment: DeploymentRecord | undefined;
  warnings: string[];
}

/** The triggers of a Worker (wrangler's trigger step): each replaced whole when given. */
export type TriggerSettings = Partial<Pick<ScriptSettings, "schedules" | "workersDev" | "routes" | "customDomains">>;

/** What changes for one Worker: the version it runs (null: none, it is deleted), its secrets, its triggers. */
interface Change {
  script: string;
  version: VersionRecord | null;
  secrets?: Record<string, string>;
  triggers?: TriggerSettings;
}

/**
 * What the Workers routes of /client/v4 do to a `celld serve` host: store an upload, make a
 * version the running one, change secrets and schedules, delete a Worker. A change takes effect
 * in this order: the Workers it leaves are started (the runtime checks them first, so a Worker
 * that cannot start leaves the running ones), then the store records it. A crash in between
 * leaves the store as it was: a restart runs the old deployment, whole.
 *
 * Calls for one Worker do not interleave: a second while one runs is refused with a conflict
 * and changes nothing. Changes of different Workers each restart the runtime: they queue.
 */
export class DeployService {
  /** Per Worker, the change being applied: a second is refused (exclusive) or waits its turn (afterChangeOf). */
  private readonly busy = new Map<string, Promise<unknown>>();
  private turn: Promise<unknown> = Promise.resolve();

  constructor(
    readonly store: DeployStore,
    private readonly runtime: WorkersRuntime,
    private readonly consumersOf: (script: string) => ConsumerConfig[] = () => [],
  ) {}

  /** Starts what was last deployed (nothing on a new data directory). */
  async start(): Promise<void> {
    await this.runtime.run(this.workersWith(undefined));
  }

  /** Throws 10007 unless the Worker has been uploaded here. */
  requireScript(script: string): void {
    if (!this.store.has(script)) throw new DeployError("script_not_found", `This Worker does not exist on your account. (Worker "${script}")`);
  }

  async upload(script: string, body: Uint8Array, contentType: string | undefined, options: UploadOptions): Promise<UploadResult> {
    const parsed = await parseUploadForm(body, contentType);
    return this.exclusive(script, async () => {
      const { secrets, input } = this.newVersion(script, parsed, options.annotations);
      this.checkSecrets(script, secrets);
      const version = this.store.addVersion(script, input);
      try {
        // A version only uploaded is checked as it would run, so that it fails now, as on Cloudflare.
        if (!options.deploy) await this.runtime.check(this.workersWith({ script, version, secrets }));
        else await this.apply({ script, version, secrets });
      } catch (error) {
        this.store.discardVersion(script, version.id);
        throw error;
      }
      this.store.putSecrets(script, secrets);
      if (!options.deploy) return { version, deployment: undefined, warnings: parsed.warnings };
      const deployment = this.store.deploy(script, version.id, { annotations: options.annotations });
      return { version, deployment, warnings: parsed.warnings };
    });
  }

  /** `POST .../deployments` and rollback: one version, all the traffic. */
  async deploy(script: string, versionId: string, annotations: Record<string, string>): Promise<DeploymentRecord> {
    this.requireScript(script);
    return this.exclusive(script, async () => {
      const version = this.store.version(script, versionId);
      await this.apply({ script, version });
      return this.store.deploy(script, version.id, { annotations });
    });
  }

  async putSecret(script: string, name: string, text: string): Promise<void> {
    this.requireScript(script);
    const secrets = { [name]: text };
    this.checkSecrets(script, secrets);
    await this.exclusive(script, async () => {
      const active = this.store.active(script);
      if (active !== undefined) await this.apply({ script, version: active.version, secrets });
      this.store.putSecrets(script, secrets);
    });
  }

  async deleteSecret(script: string, name: string): Promise<boolean> {
    this.requireScript(script);
    return this.exclusive(script, async () => {
      if (!Object.hasOwn(this.store.secretValues(script), name)) return false;
      const active = this.store.active(script);
      if (active !== undefined) {
        const rest = this.store.secretValues(script);
        delete rest[name];
        await this.apply({ script, version: active.version, secrets: rest }, true);
      }
      return this.store.deleteSecret(script, name);
    });
  }

  /**
   * `PUT .../schedules`, `.../routes`, `.../domains/records`, `POST .../subdomain`: each replaced
   * whole. The running Worker restarts only if one changed; a route another Worker has is refused.
   */
  async setTriggers(script: string, triggers: TriggerSettings): Promise<ScriptSettings> {
    this.requireScript(script);
    // wrangler's trigger step sends routes, custom domains, schedules... at once: each waits its turn.
    await this.afterChangeOf(script);
    return this.exclusive(script, async () => {
      this.checkRoutesFree(script, triggers);
      const current = this.store.settings(script);
      const changed = (Object.keys(triggers) as (keyof TriggerSettings)[]).some((key) => !sameSetting(current[key], triggers[key]));
      const active = this.store.active(script);
      if (changed && active !== undefined) await this.apply({ script, version: active.version, triggers });
      return this.store.updateSettings(script, triggers);
    });
  }

  /** Each route pattern and custom domain belongs to one Worker, as on Cloudflare. */
  private checkRoutesFree(script: string, triggers: TriggerSettings): void {
    for (const other of this.store.scripts()) {
      if (other === script) continue;
      const settings = this.store.settings(other);
      const route = triggers.routes?.find((r) => settings.routes.includes(r));
      if (route !== undefined) throw new DeployError("invalid_request", `the route ${route} is already assigned to Worker "${other}"`);
      const domain = triggers.customDomains?.find((d) => settings.customDomains.includes(d));
      if (domain !== undefined) throw new DeployError("invalid_request", `the custom domain ${domain} is already assigned to Worker "${other}"`);
    }
  }

  /** Stops the Worker, then removes it, its versions and secrets. */
  async deleteScript(script: string): Promise<void> {
    this.requireScript(script);
    await this.exclusive(script, async () => {
      if (this.store.active(script) !== undefined) await this.apply({ script, version: null });
      this.store.deleteScript(script);
    });
  }

  private async apply(change: Change, replaceSecrets = false): Promise<void> {
    const run = this.turn.then(() => this.runtime.run(this.workersWith(change, replaceSecrets)));
    this.turn = run.catch(() => undefined);
    await run;
  }

  /** Every deployed Worker as the store has it, with `change` applied. */
  private workersWith(change: Change | undefined, replaceSecrets = false): WorkerConfig[] {
    const scripts = new Set(this.store.scripts());
    if (change !== undefined) {
      if (change.version === null) scripts.delete(change.script);
      else scripts.add(change.script);
    }
    return [...scripts].sort().map((script) => {
      const changed = change?.script === script ? change : undefined;
      const version = changed?.version ?? this.store.active(script)!.version;
      const stored = this.store.secretValues(script);
      const secrets = changed?.secrets === undefined ? stored : replaceSecrets ? changed.secrets : { ...stored, ...changed.secrets };
      const settings = this.store.settings(script);
      return versionWorker({
        version,
        modulesDir: this.store.modulesDir(script, version.id),
        assetsDir: this.store.assetsDir(script, version.id),
        settings: { ...settings, ...changed?.triggers },
        secrets,
        consumers: this.consumersOf(script),
      });
    });
  }

  /**
   * The stored form of an upload: `inherit` bindings resolved from the Worker's latest version,
   * secret values taken out (they go to the secrets file), migrations applied to its classes.
   */
  private newVersion(script: string, parsed: ParsedUpload, annotations: Record<string, string>): { secrets: Record<string, string>; input: NewVersion } {
    const previous = this.store.versions(script)[0];
    const { metadata } = parsed;
    const secrets: Record<string, string> = {};
    const bindings: UploadBinding[] = [];
    for (const binding of metadata.bindings) {
      if (isKnownBinding(binding) && binding.type === "secret_text") secrets[binding.name] = binding.text;
      else if (isKnownBinding(binding) && binding.type === "inherit") bindings.push(inherited(script, binding, previous));
      else bindings.push(binding);
    }
    // keep_bindings (versions upload, --keep-vars): the previous version's bindings of those types stay.
    for (const kept of previous?.bindings ?? []) {
      if (metadata.keep_bindings.includes(kept.type) && !bindings.some((b) => b.name === kept.name)) bindings.push(kept);
    }
    const migrated = applyUploadMigrations(
      { classes: previous?.durableObjectClasses ?? [], tag: previous?.migrationTag },
      metadata.migrations,
    );
    return {
      secrets,
      input: {
        modules: parsed.modules,
        mainModule: parsed.mainModule,
        annotations: { "workers/triggered_by": "upload", ...metadata.annotations, ...annotations },
        // wrangler's draft Worker (secret put before any deploy) sends no date: workerd's oldest.
        compatibilityDate: metadata.compatibility_date ?? "2021-11-02",
        compatibilityFlags: metadata.compatibility_flags,
        bindings,
        durableObjectClasses: migrated.classes,
        migrationTag: migrated.tag,
        ...this.uploadedAssets(script, metadata, previous),
      },
    };
  }

  /** The upload's assets: its completed assets upload, or (keep_assets) the previous version's. */
  private uploadedAssets(script: string, metadata: UploadMetadata, previous: VersionRecord | undefined): Pick<NewVersion, "assets"> {
    if (metadata.assets !== undefined) {
      return { assets: { manifest: this.store.assetUploads.takeCompletion(script, metadata.assets.jwt), config: assetsServing(metadata.assets.config) } };
    }
    if (metadata.keep_assets === true && previous?.assets !== undefined) return { assets: { manifest: previous.assets.manifest, config: previous.assets.config } };
    return {};
  }

  private checkSecrets(script: string, secrets: Record<string, string>): void {
    for (const [name, value] of Object.entries(secrets)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]{0,254}$/.test(name)) {
        throw new DeployError("invalid_request", `secret name ${JSON.stringify(name)} is not valid: letters, digits and "_", not starting with a digit, at most 255`);
      }
      const bytes = Buffer.byteLength(value);
      if (bytes > deployLimits.secretValueBytesMax) {
        throw new DeployError("invalid_request", `secret "${name}" is ${bytes} bytes, over the bound of ${deployLimits.secretValueBytesMax}`);
      }
    }
    const names = new Set([...this.store.secretNames(script), ...Object.keys(secrets)]);
    if (names.size > deployLimits.secretsPerScriptMax) {
      throw new DeployError("invalid_request", `Worker "${script}" would have ${names.size} secrets, over the bound of ${deployLimits.secretsPerScriptMax}`);
    }
  }

  /** Resolves when no change of the Worker is being applied (then the caller takes its turn at once). */
  private async afterChangeOf(script: string): Promise<void> {
    while (this.busy.has(script)) await this.busy.get(script)!.catch(() => undefined);
  }

  private async exclusive<T>(script: string, fn: () => Promise<T>): Promise<T> {
    if (this.busy.has(script)) {
      throw new DeployError("conflict", `another change to Worker "${script}" is being applied; this one changed nothing, try again when it is done`);
    }
    const running = fn();
    this.busy.set(script, running);
    try {
      return await running;
    } finally {
      this.busy.delete(script);
    }
  }

}

function sameSetting(a: unknown, b: unknown): boolean {
  const sorted = (v: unknown) => (Array.isArray(v) ? [...(v as string[])].sort() : v);
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

function assetsServing(config: NonNullable<UploadMetadata["assets"]>["config"]): AssetsServing {
  return {
    ...(config.html_handling === undefined ? {} : { html_handling: config.html_handling }),
    ...(config.not_found_handling === undefined ? {} : { not_found_handling: config.not_found_handling }),
    ...(config.run_worker_first === undefined ? {} : { run_worker_first: config.run_worker_first }),
  };
}

function inherited(script: string, binding: Extract<KnownBinding, { type: "inherit" }>, previous: VersionRecord | undefined): UploadBinding {
  const from = binding.old_name ?? binding.name;
  const found = previous?.bindings.find((b) => b.name === from);
  if (found === undefined) {
    throw new DeployError("invalid_upload", `binding "${binding.name}" inherits "${from}", which the latest version of Worker "${script}" does not have`);
  }
  return { ...found, name: binding.name };
}
