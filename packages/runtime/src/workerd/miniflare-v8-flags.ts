/**
 * Starts Miniflare's workerd with V8 flags.
 *
 * Why: under steady HTTP load, workerd's garbage collector frees the C++ side of dead Request,
 * Response and Headers objects in one go, holding the Worker thread for 50-80 ms every few
 * seconds (seen with `perf`; see docs/performance.md). A smaller young generation makes those
 * pauses smaller and more frequent. workerd takes V8 flags only from its config's `v8Flags`, and
 * Miniflare 4 has no option for that field, so this module wraps the exported `Runtime` class's
 * `updateConfig`, which receives the serialized config just before writing it to workerd's stdin,
 * and adds the flags to those bytes (workerd-config-v8-flags.ts).
 *
 * The setting is process-wide: every Miniflare this process starts after `setWorkerdV8Flags` gets
 * the flags last set. celld runs one host per process; a test that starts hosts with different
 * flags must start them one after another. Checked against miniflare 4.20260426.0; the shape
 * check throws naming that version if `Runtime` changes, and runtime/test/workerd-v8-flags.test.ts
 * reads a flag's effect inside a real workerd.
 */
import { Runtime } from "miniflare";
import { installedMiniflareVersion, wiredMiniflareVersion } from "./miniflare-version.ts";
import { withV8Flags } from "./workerd-config-v8-flags.ts";

type UpdateConfig = (this: unknown, config: Uint8Array, ...rest: unknown[]) => Promise<unknown>;

const installedMark = Symbol.for("celld.miniflare-v8-flags");
let currentFlags: readonly string[] = [];

/** The flags every workerd started from now on in this process gets (none: workerd's defaults). */
export function setWorkerdV8Flags(flags: readonly string[]): void {
  installV8FlagsPatch();
  currentFlags = [...flags];
}

function installV8FlagsPatch(): void {
  const proto = (Runtime as unknown as { prototype?: { updateConfig?: UpdateConfig; [installedMark]?: true } } | undefined)?.prototype;
  if (proto?.[installedMark] === true) return;
  const original = proto?.updateConfig;
  // updateConfig(configBuffer, options, workerNames, abortSignal): the config comes first.
  if (typeof original !== "function" || original.length < 1) {
    throw new Error(
      `celld sets workerd's V8 flags through internals of miniflare ${wiredMiniflareVersion}, and miniflare ` +
        `${installedMiniflareVersion()} differs: Runtime.prototype.updateConfig(configBuffer, ...) is missing. ` +
        "Re-check packages/runtime/src/workerd/miniflare-v8-flags.ts.",
    );
  }
  proto!.updateConfig = function (this: unknown, config: Uint8Array, ...rest: unknown[]) {
    if (currentFlags.length === 0) return original.call(this, config, ...rest);
    const patched = withV8Flags(config, currentFlags);
    return original.call(this, Buffer.from(patched.buffer, patched.byteOffset, patched.length), ...rest);
  };
  proto![installedMark] = true;
}
