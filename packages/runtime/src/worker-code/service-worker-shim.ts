import type { WorkerBundle } from "../bundle/bundle.ts";
import { queueErrorMarker } from "./queue-error-record.ts";
import { serviceWorkerShimBody } from "./worker-code-bundles.ts";

/**
 * The service-worker shim (service-worker-shim.worker.ts says what it does) as code put before the
 * script's first line. Such a script is one plain script, with no imports, so the shim's code is one
 * arrow function called at once in strict mode: it runs first, leaves no binding in the script's
 * global scope, and the token is an argument of the install call, in no function the script can
 * reach and read with toString() (strict functions are not handed out by a stack's call sites
 * either). The built-ins it uses are taken before the script runs.
 */
export function serviceWorkerShim(consumerToken: string | undefined): string {
  const marker = consumerToken === undefined ? "undefined" : JSON.stringify(queueErrorMarker(consumerToken));
  const { code, install } = serviceWorkerShimBody();
  return `(() => {
"use strict";
${code}
${install}(${marker}, console.error, Reflect.apply, JSON.stringify, console, globalThis, globalThis.addEventListener);
})();`;
}

/**
 * The script's bundle with the shim on its first lines. The map gives those lines no position,
 * and entryLines tells StackPositions to drop the shim's own frames, as it drops a module shim's.
 */
export function withServiceWorkerShim(bundle: WorkerBundle, consumerToken: string | undefined): WorkerBundle {
  const shim = serviceWorkerShim(consumerToken);
  const lines = shim.split("\n").length;
  return {
    ...bundle,
    code: `${shim}\n${bundle.code}`,
    sourceMap: { ...bundle.sourceMap, mappings: ";".repeat(lines) + bundle.sourceMap.mappings },
    entryLines: lines,
  };
}
