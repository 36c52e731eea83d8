import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import { run, waitFor, type Run } from "./cli-harness.ts";

/** The Workers environment the real-client tests of `celld serve` deploy to. */
export const servedEnv = "orgs/acme/projects/web/envs/prod";

export interface ServeRun {
  serve: Run;
  /** `--port`: the Workers. */
  workers: string;
  /** `--api-port`: the native and Cloudflare APIs. */
  api: string;
}

export interface ServeScratch {
  /** A temp directory, removed after the test. */
  tempDir(prefix: string): string;
  /** `celld serve` on free ports over `dataDir`, stopped (`stopSignal`) after the test unless `forget` was told. */
  startServe(dataDir: string, options?: { extraArgs?: string[]; timeoutMs?: number }): Promise<ServeRun>;
  /** The test stopped (or killed) this run itself: nothing to do after it. */
  forget(serve: Run): void;
}

/**
 * What the tests of the real `celld serve` leave behind, cleaned after each test: the runs first
 * (a directory goes only once nothing holds it), then the temp directories. Call once, at the top
 * of a test file.
 */
export function serveScratchAfterEach(stopSignal: NodeJS.Signals = "SIGTERM"): ServeScratch {
  const dirs: string[] = [];
  const running: Run[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) {
      r.kill(stopSignal);
      await r.exited;
    }
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return {
    tempDir(prefix) {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
    async startServe(dataDir, options = {}) {
      const args = ["serve", "--data", dataDir, "--port", "0", "--api-port", "0", "--workers-env", servedEnv, ...(options.extraArgs ?? [])];
      const serve = run(args, dataDir);
      running.push(serve);
      const [, workers, api] = await waitFor(serve, /Workers on (http:\/\/\S+); API on (http:\/\/\S+) /, options.timeoutMs ?? 60_000);
      return { serve, workers: workers!, api: api! };
    },
    forget(serve) {
      const at = running.indexOf(serve);
      if (at >= 0) running.splice(at, 1);
    },
  };
}
