import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ApiKeyStore } from "../packages/runtime/src/api/index.ts";
import { wranglerAgainst } from "../packages/runtime/test/wrangler-cli.ts";
import { servedEnv, serveScratchAfterEach } from "./serve-cli.ts";

/**
 * What `wrangler deploy` carries besides the script, against `celld serve`, with the real wrangler
 * 4.86: a queue consumer (wrangler's consumer calls after the upload) fed by another Worker's
 * producer binding, a cron schedule, routes and a custom domain (the zone look-ups), the workers.dev
 * switch, an R2 bucket wrangler finds missing and creates. Then the refusal wrangler meets: a route
 * another Worker has (assets: deploy-wrangler-assets.test.ts). One serve and few wrangler runs: each costs seconds here.
 */

const env = servedEnv;
const scratch = serveScratchAfterEach();
const tempDir = scratch.tempDir;

function project(files: Record<string, string>): string {
  const dir = tempDir("celld-project-");
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** A request with the Host a browser would send for that name (fetch() may not set Host). */
function asHost(base: string, host: string, path = "/"): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(new URL(path, base), { headers: { host } }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on("error", reject)
      .end();
  });
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const back = {
  "wrangler.toml": `name = "back"
main = "src/index.js"
compatibility_date = "2025-01-01"
[triggers]
crons = ["* * * * *"]
[[queues.consumers]]
queue = "jobs"
max_batch_size = 5
max_batch_timeout = 1
[[r2_buckets]]
binding = "FILES"
bucket_name = "files"
`,
  "src/index.js": `export default {
  async fetch() { return new Response("back"); },
  async queue(batch, env) { for (const m of batch.messages) await env.FILES.put("job-" + m.body.n, "done by back"); },
  async scheduled(controller, env) { await env.FILES.put("cron", controller.cron); },
};
`,
};

const front = {
  "wrangler.toml": `name = "front"
main = "src/index.js"
compatibility_date = "2025-01-01"
workers_dev = false
routes = [
  { pattern = "api.example.test/*", zone_name = "example.test" },
  { pattern = "shop.example.test", custom_domain = true },
]
[[queues.producers]]
binding = "JOBS"
queue = "jobs"
[[r2_buckets]]
binding = "FILES"
bucket_name = "files"
`,
  "src/index.js": `export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    if (url.pathname === "/send") { await env.JOBS.send({ n: Number(url.searchParams.get("n")) }); return new Response("sent"); }
    if (url.pathname.startsWith("/files/")) { const o = await env.FILES.get(url.pathname.slice(7)); return new Response(o === null ? "none" : await o.text()); }
    return new Response("front " + url.hostname + url.pathname);
  },
};
`,
};

describe("wrangler deploy's triggers and bindings on celld serve", () => {
  it("runs consumers, crons, routes, custom domains and workers.dev; creates a missing R2 bucket; refuses a taken route", { timeout: 600_000 }, async () => {
    const dataDir = tempDir("celld-serve-");
    const keys = ApiKeyStore.open(dataDir);
    const scopes = ["workers:write", "workers:read", "events:write", "events:read"] as const;
    const { key } = keys.create({ env, scopes: [...scopes] });
    const { key: otherEnv } = keys.create({ env: "orgs/acme/projects/web/envs/staging", scopes: [...scopes] });
    keys.close();
    const { serve, workers, api } = await scratch.startServe(dataDir, { extraArgs: ["--workers-dev-domain", "workers.test"] });
    const cf = (path: string, init: RequestInit = {}, token = key) =>
      fetch(`${api}/client/v4${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...init.headers } }).then(
        async (r) => ({ status: r.status, json: (await r.json()) as { success: boolean; result: any; errors: { code: number; message: string }[] } }),
      );
    const ok = (r: { code: number; stdout: string; stderr: string }) => {
      expect(r.code, r.stdout + r.stderr).toBe(0);
      return r.stdout;
    };

    // Only the Workers environment's tokens deploy: another's would bind queues its owner cannot see.
    const refused = await cf("/accounts/acme/workers/services/back", {}, otherEnv);
    expect(refused.status).toBe(403);
    expect(refused.json.errors[0]!.code).toBe(9109);

    const backDir = project(back);
    const wranglerBack = wranglerAgainst(api!, key, "acme", backDir);
    // wrangler checks a configured queue exists before it uploads (and says so): it is created first.
    ok(await wranglerBack(["queues", "create", "jobs"]));
    const deployedBack = ok(await wranglerBack(["deploy"]));
    expect(deployedBack).toMatch(/Consumer for jobs/);
    expect(deployedBack).toMatch(/schedule: \* \* \* \* \*/);
    expect((await cf("/accounts/acme/r2/buckets/files")).json.result.name).toBe("files");
    expect(serve.output()).toMatch(/cron "\* \* \* \* \*" -> Worker "back"/);

    const frontDir = project(front);
    const wranglerFront = wranglerAgainst(api!, key, "acme", frontDir);
    const deployedFront = ok(await wranglerFront(["deploy"]));
    expect(deployedFront).toMatch(/api\.example\.test\/\* \(zone name: example\.test\)/);
    expect(deployedFront).toMatch(/shop\.example\.test \(custom domain\)/);

    // Each Worker by its name host, the routes and the custom domain, the workers.dev switch.
    expect((await asHost(workers!, "back.localhost")).body).toBe("back");
    // front has workers_dev = false: no name host at all, as its workers.dev URL goes on Cloudflare.
    expect(await asHost(workers!, "front.localhost", "/x")).toMatchObject({ status: 404 });
    expect((await asHost(workers!, "api.example.test", "/v1/items")).body).toBe("front api.example.test/v1/items");
    expect((await asHost(workers!, "shop.example.test", "/cart")).body).toBe("front shop.example.test/cart");
    expect((await asHost(workers!, "back.workers.test")).body).toBe("back");
    expect(await asHost(workers!, "front.workers.test")).toMatchObject({ status: 404 });

    // front's producer binding feeds back's consumer, which the consumer calls after upload started.
    for (const n of [1, 2, 3]) expect((await asHost(workers!, "api.example.test", `/send?n=${n}`)).body).toBe("sent");
    for (const n of [1, 2, 3]) {
      await until(`job ${n}`, 30_000, async () => ((await asHost(workers!, "api.example.test", `/files/job-${n}`)).body === "done by back" ? true : undefined));
    }
    const [jobs] = (await cf("/accounts/acme/queues?name=jobs")).json.result as { producers: unknown[]; consumers: { script: string }[] }[];
    expect(jobs!.producers).toEqual([{ type: "worker", script: "front" }]);
    expect(jobs!.consumers.map((c) => c.script)).toEqual(["back"]);

    // The zone look-ups wrangler makes on a later deploy (to refuse another Worker's route).
    const [zone] = (await cf("/zones?name=example.test&account.id=acme")).json.result as { id: string; name: string }[];
    expect(zone!.name).toBe("example.test");
    expect((await cf(`/zones/${zone!.id}/workers/routes`)).json.result).toMatchObject([{ pattern: "api.example.test/*", script: "front" }]);

    // A route another Worker has: wrangler reads the zone's routes and stops, naming the owner.
    const other = project({
      "wrangler.toml": `name = "other"\nmain = "src/index.js"\ncompatibility_date = "2025-01-01"\nworkers_dev = false\nroutes = [{ pattern = "api.example.test/*", zone_name = "example.test" }]\n`,
      "src/index.js": `export default { fetch() { return new Response("other") } }`,
    });
    const taken = await wranglerAgainst(api!, key, "acme", other)(["deploy"]);
    expect(taken.code).not.toBe(0);
    // wrangler checks the zone's routes on later deploys; on a first one celld refuses the routes call itself.
    expect(taken.stdout + taken.stderr).toMatch(/"front" is already assigned to routes|api\.example\.test\/\* is already assigned to Worker "front"/);
    expect((await asHost(workers!, "api.example.test", "/v1")).body).toBe("front api.example.test/v1");

    // An upload whose producer binding names a missing queue creates it, as Cloudflare has since
    // 2026 (wrangler 4.86 itself checks first, above); a binding celld does not run is a warning.
    const form = new FormData();
    form.set("metadata", JSON.stringify({
      main_module: "index.js",
      compatibility_date: "2025-01-01",
      bindings: [{ type: "queue", name: "Q", queue_name: "made-on-deploy" }, { type: "ai", name: "AI" }],
    }));
    form.set("index.js", new File(["export default { async fetch(r, env) { await env.Q.send('x'); return new Response('queued') } }"], "index.js", { type: "application/javascript+module" }));
    const uploaded = await cf("/accounts/acme/workers/scripts/direct", { method: "PUT", body: form });
    expect(uploaded.json.success, JSON.stringify(uploaded.json)).toBe(true);
    const { messages } = uploaded.json as unknown as { messages: { message: string }[] };
    expect(messages.map((m) => m.message)).toEqual([`binding "AI" of type "ai" is not run by celld: the Worker's env has no AI`]);
    expect((await asHost(workers!, "direct.localhost")).body).toBe("queued");
    const [made] = (await cf("/accounts/acme/queues?name=made-on-deploy")).json.result as { queue_name: string; producers: unknown[] }[];
    expect(made).toMatchObject({ queue_name: "made-on-deploy", producers: [{ type: "worker", script: "direct" }] });

    // The cron: back's scheduled() ran at a minute boundary and wrote what front reads.
    await until("the cron run", 90_000, async () => ((await asHost(workers!, "api.example.test", "/files/cron")).body === "* * * * *" ? true : undefined));

    // Deleting a Worker drops its queue consumers; the queue and the producer stay.
    ok(await wranglerBack(["delete", "--force"]));
    const [after] = (await cf("/accounts/acme/queues?name=jobs")).json.result as { producers: unknown[]; consumers: unknown[] }[];
    expect(after).toMatchObject({ producers: [{ type: "worker", script: "front" }], consumers: [] });
  });
});
