import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onTestFinished } from "vitest";
import { wranglerProcess } from "./wrangler-process.ts";

export type { WranglerResult } from "./wrangler-process.ts";

/**
 * Runs the real wrangler against a celld API server, as a user points it at celld (see
 * wranglerProcess). It runs in a directory of its own (wrangler caches the account under
 * ./node_modules/.cache) with its own config home, removed when the test finishes.
 */
export function wranglerAgainst(apiUrl: string, token: string, account: string | undefined, projectDir?: string) {
  const home = mkdtempSync(join(tmpdir(), "celld-wrangler-"));
  onTestFinished(() => rmSync(home, { recursive: true, force: true }));
  // A project's directory (wrangler deploy reads its config there), else the home of its own.
  return wranglerProcess(apiUrl, token, account, projectDir ?? home, home);
}
