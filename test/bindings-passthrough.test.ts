import { afterEach, expect, test } from "vitest";
import { DataDirInUseError } from "../packages/runtime/src/host/data-dir-lock.ts";
import { project, runHost, type Project, type RunningHost } from "./host-harness.ts";

const projects: Project[] = [];
const hosts: RunningHost[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
  projects.splice(0).forEach((p) => p.remove());
});

// Two Workers: "app" uses KV, D1, R2, a Durable Object (imported from cloudflare:workers) and a
// service binding to "helper". Everything it writes must survive a restart on the same data dir.
function write(p: Project): string[] {
  p.write({
    "app/wrangler.toml": `
name = "app"
main = "src/index.ts"
compatibility_date = "2026-04-01"
kv_namespaces = [{ binding = "KV", id = "kv-app" }]
d1_databases = [{ binding = "DB", database_name = "app", database_id = "d1-app" }]
r2_buckets = [{ binding = "BUCKET", bucket_name = "files" }]
durable_objects.bindings = [{ name = "COUNTER", class_name = "Counter" }]
services = [{ binding = "HELPER", service = "helper" }]
migrations = [{ tag = "v1", new_sqlite_classes = ["Counter"] }]
`,
    "app/src/index.ts": `
import { DurableObject } from "cloudflare:workers";
import { greet } from "./greet";

export class Counter extends DurableObject {
  async bump(): Promise<number> {
    const n = ((await this.ctx.storage.get<number>("n")) ?? 0) + 1;
    await this.ctx.storage.put("n", n);
    return n;
  }
}

export default {
  async fetch(request: Request, env: any): Promise<Response> {
    if (new URL(request.url).pathname === "/write") {
      await env.KV.put("k", "kv-value");
      await env.DB.exec("CREATE TABLE IF NOT EXISTS t (v TEXT)");
      await env.DB.prepare("INSERT INTO t (v) VALUES (?)").bind("d1-value").run();
      await env.BUCKET.put("f.txt", "r2-value");
    }
    const counter = env.COUNTER.get(env.COUNTER.idFromName("one"));
    const row = await env.DB.prepare("SELECT v FROM t").first().catch(() => null);
    return Response.json({
      kv: await env.KV.get("k"),
      d1: row === null ? null : row.v,
      r2: await (await env.BUCKET.get("f.txt"))?.text() ?? null,
      counter: await counter.bump(),
      helper: await (await env.HELPER.fetch("http://helper/")).text(),
      greeting: greet("bundled"),
    });
  },
};
`,
    "app/src/greet.ts": `export const greet = (who: string): string => \`hello, \${who}\`;\n`,
    "helper/wrangler.json": JSON.stringify({ name: "helper", main: "index.js", compatibility_date: "2026-04-01" }),
    "helper/index.js": `export default { fetch: () => new Response("from helper") };`,
  });
  return [`${p.dir}/app/wrangler.toml`, `${p.dir}/helper/wrangler.json`];
}

test("KV, D1, R2, Durable Objects and service bindings work, and persist across a restart", async () => {
  const p = project();
  projects.push(p);
  const configs = write(p);
  let h = await runHost(configs, p.dataDir);
  hosts.push(h);
  expect(await (await h.fetch("/write")).json()).toEqual({
    kv: "kv-value",
    d1: "d1-value",
    r2: "r2-value",
    counter: 1,
    helper: "from helper",
    greeting: "hello, bundled",
  });
  await h.close();
  hosts.splice(0);
  h = await runHost(configs, p.dataDir);
  hosts.push(h);
  expect(await (await h.fetch("/")).json()).toMatchObject({ kv: "kv-value", d1: "d1-value", r2: "r2-value", counter: 2 });
});

test("a second host on the same data directory is refused while the first runs", async () => {
  const p = project();
  projects.push(p);
  const configs = write(p);
  const h = await runHost(configs, p.dataDir);
  hosts.push(h);
  const error = await runHost(configs, p.dataDir).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(DataDirInUseError);
  expect(String((error as Error).message)).toContain(`is in use by another celld (pid ${process.pid})`);
});

test(".dev.vars beside a config reaches the Worker's env over vars; .env is the fallback, per config directory", async () => {
  const p = project();
  projects.push(p);
  p.write({
    "app/wrangler.toml": `
name = "app"
main = "index.js"
compatibility_date = "2026-04-01"
services = [{ binding = "HELPER", service = "helper" }]
[vars]
GREETING = "from wrangler.toml"
PLAIN = "kept"
`,
    "app/.dev.vars": `# local secrets\nGREETING="from .dev.vars"\nexport API_TOKEN=s3cret-token # not part of it\nMULTI="a\\nb"\n`,
    "app/.env": "GREETING=from .env, never read\n",
    "app/index.js": `export default {
  async fetch(request, env) {
    const helper = await (await env.HELPER.fetch("http://helper/")).json();
    return Response.json({ greeting: env.GREETING, plain: env.PLAIN, token: env.API_TOKEN, multi: env.MULTI, helper });
  },
};`,
    "helper/wrangler.json": JSON.stringify({ name: "helper", main: "index.js", compatibility_date: "2026-04-01" }),
    "helper/.env": "HELPER_SECRET='from helper/.env'\n",
    "helper/index.js": `export default { fetch: (request, env) => Response.json({ secret: env.HELPER_SECRET, token: env.API_TOKEN ?? null }) };`,
  });
  const h = await runHost([`${p.dir}/app/wrangler.toml`, `${p.dir}/helper/wrangler.json`], p.dataDir);
  hosts.push(h);
  expect(await (await h.fetch("/")).json()).toEqual({
    greeting: "from .dev.vars",
    plain: "kept",
    token: "s3cret-token",
    multi: "a\nb",
    helper: { secret: "from helper/.env", token: null },
  });
  expect(h.log.lines.join("\n")).not.toContain("s3cret-token");
});
