import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

/** The Worker both sides of the deploy bench change: it reads KV on every request and says its version. */
export const benchHost = "hello.localhost";

/** Writes the wrangler project of version `n` into `dir` (what `wrangler deploy` and `celld dev` read). */
export function writeKvProject(dir: string, n: number): void {
  mkdirSync(join(dir, "src"), { recursive: true });
  writeFileSync(
    join(dir, "wrangler.toml"),
    `name = "hello"\nmain = "src/index.js"\ncompatibility_date = "2025-01-01"\n[[kv_namespaces]]\nbinding = "KV"\nid = "kv1"\n`,
  );
  writeFileSync(
    join(dir, "src", "index.js"),
    `export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/put") { await env.KV.put("greeting", "hello"); return new Response("ok"); }
    return new Response("v${n} " + (await env.KV.get("greeting")));
  },
};`,
  );
}

/** Polls `url` every 10 ms until an answer starts with `v<n> `; resolves with the ms since `since`. */
export async function newVersionAnswers(url: URL, n: number, since: number): Promise<number> {
  for (;;) {
    try {
      const text = await (await fetch(url, { headers: { host: benchHost } })).text();
      if (text.startsWith(`v${n} `)) return performance.now() - since;
    } catch {
      // the port is closed during a dev restart
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
