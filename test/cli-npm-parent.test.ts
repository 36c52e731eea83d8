import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { celld } from "./cli-harness.ts";
import { project, type Project } from "./host-harness.ts";

const projects: Project[] = [];
const leftRunning: number[] = [];
afterEach(() => {
  for (const pid of leftRunning.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  projects.splice(0).forEach((p) => p.remove());
});

function workerProject(): Project {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n`,
    "worker.js": `export default { fetch: () => new Response("up") };`,
  });
  return p;
}

/**
 * celld under a shell, as npm runs a script (`sh -c "..."`); `; true` keeps the shell from
 * handing its process over to celld. Returns celld's pid and its output so far.
 */
async function underShell(p: Project, env: NodeJS.ProcessEnv) {
  const shell = spawn("sh", ["-c", `"${process.execPath}" "${celld}" dev --port 0; true`], { cwd: p.dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  shell.stdout.on("data", (d: Buffer) => (output += d.toString()));
  shell.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const closed = new Promise<void>((resolve) => shell.on("close", () => resolve()));
  const end = Date.now() + 30_000;
  let url: string | undefined;
  while ((url = /listening on (http:\/\/\S+)/.exec(output)?.[1]) === undefined) {
    if (Date.now() > end) throw new Error(`celld did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const child = readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .find((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] === String(shell.pid);
      } catch {
        return false;
      }
    });
  leftRunning.push(Number(child));
  return { shell, celldPid: Number(child), url, output: () => output, closed };
}

/** Running: a zombie (ended, and its new parent, pid 1 here, has not reaped it) is not. */
const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
};

test.runIf(process.platform === "linux")(
  "a celld run by an npm script stops cleanly when npm's shell is killed (npm passes SIGTERM to the shell, which does not pass it on)",
  async () => {
    const p = workerProject();
    const run = await underShell(p, { ...process.env, npm_lifecycle_event: "start" });
    expect(await (await fetch(run.url)).text()).toBe("up");
    run.shell.kill("SIGTERM");
    const stoppedInTime = await Promise.race([run.closed.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 15_000))]);
    expect(stoppedInTime, `celld still running 15 s after its shell was killed:\n${run.output()}`).toBe(true);
    expect(alive(run.celldPid)).toBe(false);
    expect(run.output()).toContain("the npm script that started celld has ended: stopping");
    expect(run.output()).toContain("[celld] stopped");
    expect(existsSync(join(p.dataDir, "workerd.pid"))).toBe(false);
  },
);

test.runIf(process.platform === "linux")("a celld started from a shell outside any npm script outlives that shell (nohup, &)", async () => {
  const p = workerProject();
  const env = { ...process.env };
  delete env.npm_lifecycle_event;
  const run = await underShell(p, env);
  run.shell.kill("SIGTERM");
  // Two and a half of the watch's checks, had it been watching.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  expect(alive(run.celldPid)).toBe(true);
  expect(await (await fetch(run.url)).text()).toBe("up");
  process.kill(run.celldPid, "SIGTERM");
  await run.closed;
  expect(run.output()).toContain("SIGTERM: stopping");
});
