/**
 * Stops celld when the npm script that started it has gone. npm passes SIGINT and SIGTERM on to
 * the script's shell, but the shell (dash, Debian's sh) dies of them without passing them on: a
 * supervisor stopping `npm start` by npm's pid left celld running, serving its port and holding
 * its data directory, with no parent. Only under a package manager's script (npm, pnpm and yarn
 * set npm_lifecycle_event): a celld started by hand from a shell that then exits (`nohup`, `&`)
 * is meant to outlive it.
 */

/** How often the parent is looked for: a stop this much after npm's is soon enough. */
export const npmParentCheckMs = 1_000;

/**
 * Calls `gone` once, when the process that started this one is no longer there. Returns a
 * function that stops watching; does nothing outside a package manager's script.
 */
export function watchNpmParent(gone: () => void, env: NodeJS.ProcessEnv = process.env): () => void {
  if (env.npm_lifecycle_event === undefined) return () => {};
  // process.ppid is read once at startup: it stays the old pid after the parent has gone.
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (alive(parent)) return;
    clearInterval(timer);
    gone();
  }, npmParentCheckMs);
  timer.unref();
  return () => clearInterval(timer);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: a process another user owns has the pid. Likely a reused one, but a script run as
    // another user is possible too, and stopping a celld on a guess would be worse.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
