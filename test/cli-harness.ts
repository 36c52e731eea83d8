import { spawn } from "node:child_process";
import { join } from "node:path";

/** The CLI as a user runs it: through its bin script, from source. */
export const celld = join(import.meta.dirname, "../packages/runtime/bin/celld.mjs");

export interface Run {
  pid: number;
  output: () => string;
  exited: Promise<number | null>;
  kill: (signal: NodeJS.Signals) => void;
  killGroup: (signal: NodeJS.Signals) => void;
}

export function run(args: string[], cwd: string, options: { detached?: boolean; env?: Record<string, string> } = {}): Run {
  // detached: its own process group, so that a test can kill celld and its workerd at once.
  const env = options.env === undefined ? undefined : { ...process.env, ...options.env };
  const proc = spawn(process.execPath, [celld, ...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: options.detached ?? false });
  let output = "";
  proc.stdout.on("data", (d: Buffer) => (output += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (output += d.toString()));
  return {
    pid: proc.pid!,
    output: () => output,
    // "close": after the process has ended and its output has all been read.
    exited: new Promise((resolve) => proc.on("close", (code) => resolve(code))),
    kill: (signal) => proc.kill(signal),
    killGroup: (signal) => process.kill(-proc.pid!, signal),
  };
}

export async function waitFor(r: Run, pattern: RegExp, ms = 30_000, pollMs = 20): Promise<RegExpMatchArray> {
  const end = Date.now() + ms;
  for (;;) {
    const match = r.output().match(pattern);
    if (match !== null) return match;
    if (Date.now() > end) throw new Error(`no ${pattern} in:\n${r.output()}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

