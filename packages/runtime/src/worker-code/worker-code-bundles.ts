import { buildSync } from "esbuild";
import { fileURLToPath } from "node:url";

/**
 * The shims' Worker-side code, written as real files (`*.worker.ts`, checked by
 * packages/runtime/tsconfig.worker.json) and bundled here once a process into plain JavaScript for
 * workerd; only their parameters are generated where they are put into a Worker.
 */
const cache = new Map<string, string>();

function bundled(file: string): string {
  let code = cache.get(file);
  if (code === undefined) {
    const result = buildSync({
      entryPoints: [fileURLToPath(new URL(file, import.meta.url))],
      bundle: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      write: false,
      legalComments: "none",
      charset: "utf8",
    });
    code = result.outputFiles[0]!.text;
    cache.set(file, code);
  }
  return code;
}

/** module-shim.worker.ts as a data: URL module, which no path of the Worker's can import. */
export function moduleShimUrl(): string {
  return `data:text/javascript;base64,${Buffer.from(bundled("./module-shim.worker.ts")).toString("base64")}`;
}

/**
 * service-worker-shim.worker.ts as the body of a script: its declarations, without the export, and
 * the name of its default-exported function, which the caller calls with the parameters.
 */
export function serviceWorkerShimBody(): { code: string; install: string } {
  const code = bundled("./service-worker-shim.worker.ts");
  const exported = /export\s*\{\s*([\w$]+)\s+as\s+default\s*\};?\s*$/.exec(code);
  if (exported === null) throw new Error("service-worker-shim.worker.ts bundled without its default export");
  return { code: code.slice(0, exported.index).trimEnd(), install: exported[1]! };
}

/** tail-forward.worker.ts, the tail Worker `celld serve` gives its Workers for `wrangler tail`. */
export function tailForwardCode(): string {
  return bundled("./tail-forward.worker.ts");
}
