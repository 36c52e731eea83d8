/**
 * The V8 flags celld's workerd runs with in the benches: the host's default, or
 * CELLD_BENCH_WORKERD_V8_FLAGS (space-separated; empty for V8's own defaults) to compare settings.
 * The Miniflare baseline never gets them. Loads no Miniflare, so the driver can print them.
 */
import { defaultWorkerdV8Flags } from "../packages/runtime/src/workerd/workerd-v8-flags-default.ts";

export function benchWorkerdV8Flags(): readonly string[] {
  const flags = process.env.CELLD_BENCH_WORKERD_V8_FLAGS;
  return flags === undefined ? defaultWorkerdV8Flags : flags.split(" ").filter((f) => f !== "");
}
