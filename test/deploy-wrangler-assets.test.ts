import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ApiKeyStore } from "../packages/runtime/src/api/index.ts";
import { wranglerAgainst } from "../packages/runtime/test/wrangler-cli.ts";
import { servedEnv, serveScratchAfterEach } from "./serve-cli.ts";

/**
 * `wrangler deploy` of a project with `[assets]` to `celld serve`, with the real wrangler 4.86:
 * the assets upload session, the bucket uploads with the session token, the completion token in the
 * script upload. The files are served in front of the Worker on --port, the Worker answers the
 * other paths and reads them through its ASSETS binding; a second deploy uploads only the changed
 * file and serves its new bytes; a rollback serves the old ones again; `wrangler versions
 * secret put` (keep_assets) keeps the latest version's files; a restart serves the active version's files.
 */

const env = servedEnv;
const scratch = serveScratchAfterEach();
const tempDir = scratch.tempDir;

function write(dir: string, files: Record<string, string | Uint8Array>): void {
  for (const [path, data] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), data);
  }
}

/** A request with the Host a browser would send for that name; the body as bytes. */
function asHost(base: string, host: string, path: string): Promise<{ status: number; body: Buffer; type: string | undefined }> {
  return new Promise((resolve, reject) => {
    request(new URL(path, base), { headers: { host } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), type: res.headers["content-type"] }));
    })
      .on("error", reject)
      .end();
  });
}

const binary = new Uint8Array(Array.from({ length: 1024 }, (_, i) => (i * 37) % 256));

describe("wrangler deploy of a project with [assets] on celld serve", () => {
  it("uploads the files, serves them in front of the Worker, and serves a changed file after a second deploy", { timeout: 400_000 }, async () => {
    const dataDir = tempDir("celld-serve-");
    const keys = ApiKeyStore.open(dataDir);
    const { key } = keys.create({ env, scopes: ["workers:write", "workers:read"] });
    keys.close();
    const { serve, workers, api } = await scratch.startServe(dataDir);
    const cf = (path: string, init: RequestInit = {}, token = key) =>
      fetch(`${api}/client/v4${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...init.headers } }).then(
        async (r) => ({ status: r.status, json: (await r.json()) as { success: boolean; result: any; errors: { code: number; message: string }[] } }),
      );
    const ok = (r: { code: number; stdout: string; stderr: string }) => {
      expect(r.code, r.stdout + r.stderr).toBe(0);
      return r.stdout;
    };

    const dir = tempDir("celld-site-");
    write(dir, {
      "wrangler.toml": `name = "site"\nmain = "src/index.js"\ncompatibility_date = "2025-01-01"\n[assets]\ndirectory = "public"\nbinding = "ASSETS"\n`,
      "src/index.js": `export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    if (url.pathname === "/secret") return new Response(String(env.GREETING));
    if (url.pathname === "/via-binding") return env.ASSETS.fetch(new URL("/hello.txt", req.url));
    return new Response("worker " + url.pathname);
  },
};
`,
      "public/index.html": "<h1>site</h1>",
      "public/hello.txt": "hello v1",
      "public/img/pattern.bin": binary,
    });
    const wrangler = wranglerAgainst(api!, key, "acme", dir);
    const first = ok(await wrangler(["deploy"]));
    expect(first).toMatch(/Uploaded 3 files/);

    const get = (path: string) => asHost(workers!, "site.localhost", path);
    expect((await get("/hello.txt")).body.toString()).toBe("hello v1");
    expect((await get("/hello.txt")).type).toMatch(/^text\/plain/);
    const image = await get("/img/pattern.bin");
    expect(image.status).toBe(200);
    expect(new Uint8Array(image.body)).toEqual(binary);
    expect((await get("/")).body.toString()).toBe("<h1>site</h1>");
    expect((await get("/api/items")).body.toString()).toBe("worker /api/items");
    expect((await get("/via-binding")).body.toString()).toBe("hello v1");

    // A changed file: only it is uploaded again; the new bytes are served, the others stay.
    write(dir, { "public/hello.txt": "hello v2" });
    const second = ok(await wrangler(["deploy"]));
    expect(second).toMatch(/Uploaded 1 file \(2 already uploaded\)/);
    expect((await get("/hello.txt")).body.toString()).toBe("hello v2");
    expect((await get("/via-binding")).body.toString()).toBe("hello v2");
    expect(new Uint8Array((await get("/img/pattern.bin")).body)).toEqual(binary);
    expect((await get("/api/items")).body.toString()).toBe("worker /api/items");

    // Each version keeps its own files: a rollback serves the first deploy's bytes.
    const versions = (await cf("/accounts/acme/workers/scripts/site/versions")).json.result.items as { id: string }[];
    expect(versions).toHaveLength(2);
    ok(await wrangler(["rollback", versions[1]!.id, "--message", "back", "--yes"]));
    expect((await get("/hello.txt")).body.toString()).toBe("hello v1");

    // `wrangler versions secret put` copies the deployed version's modules (content/v2) into a new
    // version with keep_assets: it keeps the latest uploaded version's files, as Cloudflare's
    // "assets of the previously uploaded version".
    ok(await wrangler(["versions", "secret", "put", "GREETING"], "hi there"));
    const [copy] = (await cf("/accounts/acme/workers/scripts/site/versions")).json.result.items as { id: string }[];
    expect(versions.map((v) => v.id)).not.toContain(copy!.id);
    ok(await wrangler(["versions", "deploy", `${copy!.id}@100%`, "--yes"]));
    expect((await get("/secret")).body.toString()).toBe("hi there");
    expect((await get("/hello.txt")).body.toString()).toBe("hello v2");
    expect(new Uint8Array((await get("/img/pattern.bin")).body)).toEqual(binary);

    // Refusals: an assets upload without a session's token; a script upload naming no completed upload.
    const noSession = await fetch(`${api}/client/v4/accounts/acme/workers/assets/upload?base64=true`, {
      method: "POST",
      headers: { authorization: "Bearer not-a-session" },
      body: new FormData(),
    });
    expect(noSession.status).toBe(400);
    expect(((await noSession.json()) as { errors: { message: string }[] }).errors[0]!.message).toMatch(/names no open upload session/);
    const badManifest = await cf("/accounts/acme/workers/scripts/site/assets-upload-session", {
      method: "POST",
      body: JSON.stringify({ manifest: { "/../x": { hash: "0".repeat(32), size: 1 } } }),
    });
    expect(badManifest.json.errors[0]).toMatchObject({ code: 10021, message: expect.stringMatching(/manifest path "\/\.\.\/x"/) });
    const form = new FormData();
    form.set("metadata", JSON.stringify({ main_module: "index.js", compatibility_date: "2025-01-01", assets: { jwt: "forged", config: {} } }));
    form.set("index.js", new File(["export default { fetch() { return new Response('x') } }"], "index.js", { type: "application/javascript+module" }));
    const forged = await cf("/accounts/acme/workers/scripts/site", { method: "PUT", body: form });
    expect(forged.json.errors[0]).toMatchObject({ code: 10021, message: expect.stringMatching(/metadata\.assets\.jwt is not a completion token/) });
    expect((await get("/secret")).body.toString()).toBe("hi there");

    // A restart serves the active version's files from the data directory.
    serve.kill("SIGTERM");
    await serve.exited;
    scratch.forget(serve);
    const { workers: workersAgain } = await scratch.startServe(dataDir);
    expect((await asHost(workersAgain!, "site.localhost", "/hello.txt")).body.toString()).toBe("hello v2");
    expect(new Uint8Array((await asHost(workersAgain!, "site.localhost", "/img/pattern.bin")).body)).toEqual(binary);
  });
});
