import { performance } from "node:perf_hooks";
import { expect, test } from "vitest";
import { writeKvProject } from "../bench/deploy-project.ts";
import { ApiKeyStore } from "../packages/runtime/src/api/index.ts";
import { wranglerAgainst } from "../packages/runtime/test/wrangler-cli.ts";
import { servedEnv, serveScratchAfterEach } from "./serve-cli.ts";
import { steadyLoad } from "./serve-harness.ts";

// The swap as a user meets it: the real wrangler deploys to the real `celld serve` while a steady
// 200 requests/s read KV through its --port. Each deploy's time from wrangler's start to the new
// version answering is printed.

const env = servedEnv;
const scratch = serveScratchAfterEach();

test("wrangler deploy to celld serve under 200 requests/s of KV reads: none fails", { timeout: 600_000 }, async () => {
  const dataDir = scratch.tempDir("celld-serve-swap-");
  const projectDir = scratch.tempDir("celld-project-");
  const keys = ApiKeyStore.open(dataDir);
  const { key } = keys.create({ env, scopes: ["workers:write", "workers:read"] });
  keys.close();
  const { serve, workers, api } = await scratch.startServe(dataDir, { timeoutMs: 120_000 });
  const wrangler = wranglerAgainst(api!, key, "acme", projectDir);
  const host = "hello.localhost";

  writeKvProject(projectDir, 1);
  const first = await wrangler(["deploy"]);
  expect(first.code, first.stdout + first.stderr).toBe(0);
  expect(await (await fetch(new URL("/put", workers!), { headers: { host } })).text()).toBe("ok");

  const load = steadyLoad(new URL(workers!), host, 200, () => "/");
  const toNewVersion: number[] = [];
  for (const n of [2, 3]) {
    writeKvProject(projectDir, n);
    const since = performance.now();
    const deployed = wrangler(["deploy"]);
    // The first answer from the new version, polled beside the load.
    for (;;) {
      const text = await (await fetch(workers!, { headers: { host } })).text();
      if (text === `v${n} hello`) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    toNewVersion.push(Math.round(performance.now() - since));
    const done = await deployed;
    expect(done.code, done.stdout + done.stderr).toBe(0);
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  const result = await load.stop();
  expect(result.errors).toEqual([]);
  expect(result.answers.filter((a) => a.status !== 200).slice(0, 3)).toEqual([]);
  expect(result.answers.every((a) => /^v[123] hello$/.test(a.body))).toBe(true);
  console.log(`wrangler deploy under 200 req/s: ${result.sent} requests, 0 failed; wrangler start to new version answering (ms): ${toNewVersion.join(", ")}`);
});
