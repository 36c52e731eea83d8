/**
 * The serve side of the deploy bench (issue #32): the real `wrangler deploy` (the root dev
 * dependency) against a real `celld serve` process, under a steady load on its --port. Timed from
 * wrangler's start, so wrangler's bundling and API calls count, as a user waits for them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { ApiKeyStore } from "../packages/runtime/src/api/index.ts";
import { wranglerProcess } from "../packages/runtime/test/wrangler-process.ts";
import { run, waitFor } from "../test/cli-harness.ts";
import { steadyLoad, type LoadResult } from "../test/serve-harness.ts";
import { benchHost, newVersionAnswers, writeKvProject } from "./deploy-project.ts";

const env = "orgs/acme/projects/web/envs/prod";

/** One swap's stages as `celld serve` logs them, in ms. */
export interface LoggedSwap {
  checkMs: number;
  heldMs: number;
  drainMs: number;
  stopMs: number;
  startMs: number;
}

export interface WranglerRun {
  /** Per change: ms from wrangler's start until a request was answered by the new version. */
  toNewVersionMs: number[];
  /** Per change: ms from wrangler's start until it exited. */
  wranglerMs: number[];
  load: LoadResult;
  swaps: LoggedSwap[];
}

const swapLine = /Workers swapped; start check (\d+) ms \(old version serving\); requests waited (\d+) ms \(in flight (\d+), stop (\d+), start (\d+)\)/g;

function swapsIn(output: string): LoggedSwap[] {
  return [...output.matchAll(swapLine)].map((m) => ({ checkMs: +m[1]!, heldMs: +m[2]!, drainMs: +m[3]!, stopMs: +m[4]!, startMs: +m[5]! }));
}

export async function wranglerServeRun(changes: number, perSecond: number): Promise<WranglerRun> {
  const dirs = ["celld-bench-serve-", "celld-bench-project-", "celld-bench-wrangler-"].map((prefix) => mkdtempSync(join(tmpdir(), prefix)));
  const [dataDir, projectDir, home] = dirs as [string, string, string];
  const keys = ApiKeyStore.open(dataDir);
  const { key } = keys.create({ env, scopes: ["workers:write", "workers:read"] });
  keys.close();
  const serve = run(["serve", "--data", dataDir, "--port", "0", "--api-port", "0", "--workers-env", env], dataDir);
  try {
    const [, workersUrl, api] = await waitFor(serve, /Workers on (http:\/\/\S+); API on (http:\/\/\S+) /, 120_000);
    const workers = new URL(workersUrl!);
    const wrangler = wranglerProcess(api!, key, "acme", projectDir, home);
    const deploy = async (n: number) => {
      writeKvProject(projectDir, n);
      const done = await wrangler(["deploy"]);
      if (done.code !== 0) throw new Error(`wrangler deploy of v${n} failed (${done.code}):\n${done.stdout}${done.stderr}`);
    };
    await deploy(1);
    await fetch(new URL("/put", workers), { headers: { host: benchHost } });
    const load = steadyLoad(workers, benchHost, perSecond, () => "/");
    const toNewVersionMs: number[] = [];
    const wranglerMs: number[] = [];
    for (let n = 2; n <= changes + 1; n++) {
      const since = performance.now();
      const answered = newVersionAnswers(workers, n, since);
      await deploy(n);
      wranglerMs.push(performance.now() - since);
      toNewVersionMs.push(await answered);
    }
    return { toNewVersionMs, wranglerMs, load: await load.stop(), swaps: swapsIn(serve.output()) };
  } finally {
    serve.kill("SIGTERM");
    await serve.exited;
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
