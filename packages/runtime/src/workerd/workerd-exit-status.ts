/**
 * How the last workerd this process started ended: its exit code or the signal that killed it.
 *
 * Why: the host learns that workerd has gone from its output closing (Miniflare's
 * handleRuntimeStdio), and Miniflare keeps the child process private, so its exit status, the one
 * fact that tells an out-of-memory kill (SIGKILL) from a crash (SIGSEGV, SIGABRT) from an exit of
 * its own, would be lost. Miniflare 4.20260426.0 starts workerd with
 * `require("node:child_process").spawn(workerd, ["serve", ..., "--control-fd=3", ...])`, reading
 * `spawn` off the module object at each call, so wrapping that property sees each start. The
 * wrapper passes every call through unchanged and only keeps the child of calls with those two
 * arguments. ES modules that import `spawn` by name keep the original (Node copies a built-in's
 * named exports once), so nothing else in the process is touched.
 */
import type { ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { constants } from "node:os";

export interface WorkerdExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const installedMark = Symbol.for("celld.workerd-exit-status");
let lastChild: ChildProcess | undefined;

type Spawn = (command: string, args?: readonly string[], ...rest: unknown[]) => ChildProcess;

/** Starts keeping Miniflare's workerd children (once per process). */
export function watchWorkerdSpawns(): void {
  const childProcess = createRequire(import.meta.url)("node:child_process") as { spawn: Spawn; [installedMark]?: true };
  if (childProcess[installedMark] === true) return;
  const original = childProcess.spawn;
  childProcess.spawn = function (this: unknown, command: string, args?: readonly string[], ...rest: unknown[]) {
    const child = original.call(this, command, args, ...rest);
    if (Array.isArray(args) && args[0] === "serve" && args.includes("--control-fd=3")) lastChild = child;
    return child;
  } as Spawn;
  childProcess[installedMark] = true;
}

/**
 * How the last workerd started ended, once it has (up to `waitMs`: its output can close a moment
 * before Node reaps it); undefined if none was seen or it has not ended by then.
 */
export async function lastWorkerdExit(waitMs = 1_000): Promise<WorkerdExit | undefined> {
  const child = lastChild;
  if (child === undefined) return undefined;
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode };
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), waitMs);
    timer.unref();
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

/** "killed by SIGKILL (9)", "exited with status 1", or "ended, how unknown". */
export function describeWorkerdExit(exit: WorkerdExit | undefined): string {
  if (exit === undefined) return "ended, how unknown";
  if (exit.signal !== null) return `killed by ${exit.signal} (${constants.signals[exit.signal] ?? "?"})`;
  return `exited with status ${exit.code}`;
}
