/**
 * Gives each Worker's `[assets]` a file store of its own, inside Miniflare.
 *
 * Why: Miniflare's assets plugin serves a Worker's files through a workerd disk service it names
 * `assets:storage` for every Worker, and keeps only the first service of a name. A second Worker
 * with assets would read its files from the first one's directory (its manifest is its own, so
 * it answers 404 or another Worker's bytes). This module wraps the exported `PLUGINS.assets`
 * object's `getServices` so the disk service is named after the Worker
 * (`assets:storage:<worker>`), and points the Worker's asset key-value service (the only service
 * that binds the store) at that name.
 *
 * Process-wide, like the queue wiring. Checked against miniflare 4.20260426.0: the wrapper throws
 * naming that version if the services it rewrites change shape, and test/assets.test.ts serves two
 * Workers' files from one workerd.
 */
import { PLUGINS } from "miniflare";
import { installedMiniflareVersion, wiredMiniflareVersion } from "./miniflare-version.ts";

const sharedStoreName = "assets:storage";
const kvServicePrefix = "assets:kv:";
const installedMark = Symbol.for("celld.miniflare-assets-wiring");

interface ServiceBinding {
  name?: string;
  service?: { name?: string };
}

interface AssetService {
  name?: string;
  worker?: { bindings?: ServiceBinding[] };
}

type GetServices = (options: { options: { assets?: { workerName?: string } } }) => Promise<unknown>;

interface PatchableAssetsPlugin {
  getServices?: GetServices;
  [installedMark]?: true;
}

/** The store's service name for one Worker's assets. */
export function assetsStoreServiceName(workerName: string): string {
  return `${sharedStoreName}:${workerName}`;
}

/** Installs the wrapper once per process; later calls do nothing. */
export function installAssetsWiring(): void {
  const plugin = (PLUGINS as unknown as { assets?: PatchableAssetsPlugin }).assets;
  if (plugin?.[installedMark] === true) return;
  const original = plugin?.getServices;
  if (plugin === undefined || typeof original !== "function") throw changed("PLUGINS.assets.getServices is missing");
  plugin.getServices = async function (this: unknown, options) {
    const services = await original.call(this, options);
    const worker = options.options.assets?.workerName;
    if (!Array.isArray(services) || services.length === 0 || worker === undefined) return services;
    return renameStore(services as AssetService[], worker);
  };
  plugin[installedMark] = true;
}

function renameStore(services: AssetService[], worker: string): AssetService[] {
  const store = services.find((s) => s.name === sharedStoreName);
  const kv = services.find((s) => s.name === `${kvServicePrefix}${worker}`);
  const blobs = kv?.worker?.bindings?.filter((b) => b.service?.name === sharedStoreName) ?? [];
  if (store === undefined || blobs.length !== 1) {
    throw changed(`the assets plugin no longer returns one "${sharedStoreName}" service bound by "${kvServicePrefix}${worker}"`);
  }
  const name = assetsStoreServiceName(worker);
  store.name = name;
  blobs[0]!.service = { ...blobs[0]!.service, name };
  return services;
}

function changed(what: string): Error {
  return new Error(
    `celld serves each Worker's [assets] through internals of miniflare ${wiredMiniflareVersion}, and miniflare ` +
      `${installedMiniflareVersion()} differs: ${what}. Re-check packages/runtime/src/workerd/miniflare-assets-wiring.ts.`,
  );
}
