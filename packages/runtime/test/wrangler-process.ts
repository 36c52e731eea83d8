import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const wranglerBin = join(dirname(require.resolve("wrangler/package.json")), "bin", "wrangler.js");

export interface WranglerResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The real wrangler (the root dev dependency) pointed at a celld API server: base URL, token and
 * account from the environment, its config under `home`, no metrics, no update check and no TTY,
 * so every confirmation takes its non-interactive answer. Without vitest, so the bench runs it too.
 */
export function wranglerProcess(apiUrl: string, token: string, account: string | undefined, cwd: string, home: string) {
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
