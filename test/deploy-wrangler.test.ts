import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ApiKeyStore } from "../packages/runtime/src/api/index.ts";
import { wranglerAgainst } from "../packages/runtime/test/wrangler-cli.ts";
import { waitFor, type Run } from "./cli-harness.ts";
import { servedEnv, serveScratchAfterEach } from "./serve-cli.ts";

/**
 * The real wrangler 4.86 against `celld serve`, as a user deploys: each command of the deploy
 * cycle, then the Worker answering on --port. One serve for the whole cycle (each wrangler call
 * costs seconds), restarted once to show the active deployment survives.
 */

const scratch = serveScratchAfterEach();
const startServe = (dataDir: string) => scratch.startServe(dataDir);

async function stopServe(serve: Run): Promise<void> {
  serve.kill("SIGTERM");
  expect(await serve.exited).toBe(0);
  scratch.forget(serve);
}

function project(dir: string, greeting: string, code = "export default { fetch(req, env) { return new Response(`${env.GREETING} ${env.TOKEN ?? '-'}`) } }"): void {
  mkdirSync(join(dir, "src"), { recursive: true });
  writeFileSync(join(dir, "wrangler.toml"), `name = "hello"\nmain = "src/index.js"\ncompatibility_date = "2025-01-01"\n[vars]\nGREETING = "${greeting}"\n`);
  writeFileSync(join(dir, "src", "index.js"), code);
}

const body = async (url: string): Promise<string> => (await fetch(url)).text();

/** fetch() may not set Host: the Worker's name as a host reaches it as a browser's request would. */
function bodyAsHost(url: string, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { headers: { host } }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve(text));
    }).on("error", reject);
  });
}

describe("celld serve with the real wrangler", () => {
  it("deploys, replaces, keeps secrets, refuses a Worker that cannot start, rolls back, survives a restart, deletes", { timeout: 600_000 }, async () => {
    const dataDir = scratch.tempDir("celld-serve-");
    const projectDir = scratch.tempDir("celld-project-");
    const keys = ApiKeyStore.open(dataDir);
    const { key } = keys.create({ env: servedEnv, scopes: ["workers:write", "workers:read"] });
    const { key: readOnly } = keys.create({ env: servedEnv, scopes: ["workers:read"] });
    keys.close();

    let { serve, workers, api } = await startServe(dataDir);
    const wrangler = wranglerAgainst(api, key, "acme", projectDir);
    const ok = (r: { code: number; stdout: string; stderr: string }) => {
      expect(r.code, r.stdout + r.stderr).toBe(0);
      return r.stdout;
    };
    expect((await fetch(workers)).status).toBe(404);

    project(projectDir, "v1");
    expect(ok(await wrangler(["deploy"]))).toMatch(/Current Version ID: [0-9a-f-]{36}/);
    expect(await body(workers)).toBe("v1 -");
    expect(await bodyAsHost(workers, "hello.localhost")).toBe("v1 -");

    // A token without workers:write: Cloudflare's permission error, nothing changed.
    project(projectDir, "v-denied");
    const denied = await wranglerAgainst(api, readOnly, "acme", projectDir)(["deploy"]);
    expect(denied.code).not.toBe(0);
    expect(denied.stdout + denied.stderr).toMatch(/lacks the scope workers:write/);
    expect(await body(workers)).toBe("v1 -");

    project(projectDir, "v2");
    ok(await wrangler(["deploy"]));
    expect(await body(workers)).toBe("v2 -");

    ok(await wrangler(["secret", "put", "TOKEN"], "s3cret\n"));
    expect(await body(workers)).toBe("v2 s3cret");
    const listed = ok(await wrangler(["secret", "list", "--format", "json"]));
    expect(JSON.parse(listed.slice(listed.indexOf("[")))).toEqual([{ name: "TOKEN", type: "secret_text" }]);
    expect(listed).not.toContain("s3cret");
    const secretsFile = join(dataDir, "deploy", "scripts", "hello", "secrets.json");
    expect(statSync(secretsFile).mode & 0o777).toBe(0o600);
    expect(serve.output()).not.toContain("s3cret");

    // wrangler tail: the Worker's trace events (workerd's, as Cloudflare's) on the API port's WebSocket,
    // filtered as wrangler asked (`--method POST`, sent in the tail's creation body): the GET is not printed.
    const stopTail = new AbortController();
    const tailing = wrangler(["tail", "--format", "json", "--method", "POST"], undefined, stopTail.signal);
    await waitFor(serve, /wrangler tail of Worker "hello" connected/, 60_000);
    expect(await body(`${workers}/tail-get`)).toBe("v2 s3cret");
    expect(await (await fetch(`${workers}/tail-post`, { method: "POST", body: "x" })).text()).toBe("v2 s3cret");
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    stopTail.abort();
    const tailed = await tailing;
    const event = JSON.parse(tailed.stdout.slice(tailed.stdout.indexOf("{"), tailed.stdout.lastIndexOf("}") + 1)) as Record<string, any>;
    expect(event).toMatchObject({ scriptName: "hello", outcome: "ok", event: { request: { method: "POST" }, response: { status: 200 } } });
    expect(event.event.request.url).toMatch(/\/tail-post$/);
    expect(tailed.stdout).not.toContain("/tail-get");
    expect(tailed.stdout).not.toContain("s3cret");
    await waitFor(serve, /wrangler tail of Worker "hello" disconnected/, 10_000);

    // A Worker that throws at load: 10021 with workerd's words; the running one serves on.
    project(projectDir, "v3", "throw new Error('broken at load'); export default {}");
    const broken = await wrangler(["deploy"]);
    expect(broken.code).not.toBe(0);
    expect(broken.stdout + broken.stderr).toMatch(/Uncaught Error: broken at load \[code: 10021\]/);
    expect(await body(workers)).toBe("v2 s3cret");

    const versions = JSON.parse(ok(await wrangler(["versions", "list", "--json"]))) as { id: string }[];
    expect(versions).toHaveLength(2);

    ok(await wrangler(["rollback", "--message", "back to v1", "-y"]));
    expect(await body(workers)).toBe("v1 s3cret");
    const deployments = ok(await wrangler(["deployments", "list"]));
    expect(deployments).toContain("back to v1");

    // A restart runs the active deployment, whole.
    await stopServe(serve);
    ({ serve, workers, api } = await startServe(dataDir));
    expect(await body(workers)).toBe("v1 s3cret");
    const again = wranglerAgainst(api, key, "acme", projectDir);

    ok(await again(["delete", "--force"]));
    expect((await fetch(workers)).status).toBe(404);
    expect(readdirSync(join(dataDir, "deploy", "scripts"))).toEqual([]);
  });
});
