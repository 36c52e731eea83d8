import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { onTestFinished } from "vitest";

const require = createRequire(import.meta.url);
const wranglerBin = join(dirname(require.resolve("wrangler/package.json")), "bin", "wrangler.js");

export interface WranglerResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real wrangler (the root dev dependency) against a celld API server, as a user points it
 * at celld: base URL, token and account from the environment. It runs in a directory of its own
 * (wrangler caches the account under ./node_modules/.cache) with its own config home, no metrics,
 * no update check and no TTY, so every confirmation takes its non-interactive answer.
 */
export function wranglerAgainst(apiUrl: string, token: string, account: string | undefined, projectDir?: string) {
  const home = mkdtempSync(join(tmpdir(), "celld-wrangler-"));
  onTestFinished(() => rmSync(home, { recursive: true, force: true }));
  // A project's directory (wrangler deploy reads its config there), else the home of its own.
  const cwd = projectDir ?? home;
  // `stop`: for a command that runs until stopped (tail), ended as Ctrl-C ends it (SIGINT).
  return (args: readonly string[], stdin?: string, stop?: AbortSignal): Promise<WranglerResult> =>
    new Promise((resolve) => {
      const env: NodeJS.ProcessEnv = {
        PATH: process.env["PATH"],
        HOME: home,
        XDG_CONFIG_HOME: join(home, ".config"),
        CLOUDFLARE_API_BASE_URL: `${apiUrl}/client/v4`,
        CLOUDFLARE_API_TOKEN: token,
        WRANGLER_SEND_METRICS: "false",
        WRANGLER_SEND_ERROR_REPORTS: "false",
        WRANGLER_HIDE_BANNER: "true",
        CI: "1",
        NO_COLOR: "1",
      };
      if (account !== undefined) env["CLOUDFLARE_ACCOUNT_ID"] = account;
      const child = execFile(process.execPath, [wranglerBin, ...args], { cwd, env, timeout: 90_000, killSignal: "SIGINT", ...(stop === undefined ? {} : { signal: stop }) }, (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1;
        resolve({ code, stdout, stderr });
      });
      // wrangler reads a secret's value from stdin when it is not a TTY.
      child.stdin?.end(stdin ?? "");
    });
}
