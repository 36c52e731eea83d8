import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { CellRegistry } from "../packages/queue-cell/src/index.ts";
import { readProcess } from "../packages/runtime/src/workerd/workerd-orphans.ts";
import { celld, run, waitFor } from "./cli-harness.ts";
import { childProcessesOf, project, type Project } from "./host-harness.ts";

const projects: Project[] = [];
afterEach(() => projects.splice(0).forEach((p) => p.remove()));

/** A Worker that queues one job per POST and logs a line per request, so that it writes output on demand. */
function loggingProject(): Project {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\n`,
    "worker.js": `export default {
  async fetch(req, env) {
    console.log("request " + req.method);
    if (req.method === "POST") await env.JOBS.send({ n: 1 });
    return Response.json(await env.JOBS.metrics());
  },
};`,
  });
  return p;
}

/** What a stop leaves in the data directory's run/: nothing, once celld has closed its sockets. */
function socketsLeft(dataDir: string): string[] {
  const dir = join(dataDir, "run");
  return existsSync(dir) ? readdirSync(dir) : [];
}

test("SIGHUP (a closed terminal, a `kill -HUP`) stops celld cleanly, as SIGTERM does, with status 0", async () => {
  const p = loggingProject();
  const r = run(["dev", "--port", "0"], p.dir);
  const [, url] = await waitFor(r, /listening on (http:\/\/\S+)/);
  expect(await (await fetch(url!, { method: "POST" })).json()).toMatchObject({ backlogCount: 1 });
  r.kill("SIGHUP");
  expect(await r.exited).toBe(0);
  expect(r.output()).toContain("SIGHUP: stopping");
  expect(r.output()).toContain("[celld] stopped");
  expect(socketsLeft(p.dataDir)).toEqual([]);
  expect(existsSync(join(p.dataDir, "workerd.pid"))).toBe(false);
});

test("stdout closed under celld (`celld dev | head -1`) stops it cleanly with status 1, instead of an EPIPE crash", async () => {
  const p = loggingProject();
  const proc = spawn(process.execPath, [celld, "dev", "--port", "0"], { cwd: p.dir, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on("close", (code) => resolve(code)));
  const seen = (pattern: RegExp): Promise<RegExpExecArray> =>
    new Promise((resolve) => {
      const look = (): void => {
        const match = pattern.exec(stdout);
        if (match === null) return;
        proc.stdout.off("data", look);
        resolve(match);
      };
      proc.stdout.on("data", look);
      look();
    });
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const [, url] = await seen(/listening on (http:\/\/\S+)/);
  await seen(/\[celld\] queues: jobs\n/);
  expect(await (await fetch(url!, { method: "POST" })).json()).toMatchObject({ backlogCount: 1 });
  await seen(/request POST\n/);
  // As `head` does once it has its lines: the read end goes away, and the next write fails.
  proc.stdout.destroy();
  // Its line is the first write that fails; the request itself may be cut short by the stop.
  await fetch(url!).catch(() => undefined);
  expect(await exited).toBe(1);
  expect(stderr).not.toContain("Unhandled 'error' event");
  expect(stderr).toMatch(/stdout was closed \(EPIPE\): stopping/);
  expect(stderr).toContain("[celld] stopped");
  expect(socketsLeft(p.dataDir)).toEqual([]);

  // The message the closed output did not stop is there at the next start.
  const again = run(["dev", "--port", "0"], p.dir);
  const [, url2] = await waitFor(again, /listening on (http:\/\/\S+)/);
  expect(await (await fetch(url2!)).json()).toMatchObject({ backlogCount: 1 });
  again.kill("SIGTERM");
  expect(await again.exited).toBe(0);
});

test("a second SIGTERM during the stop exits at once with 143, as a shell reports a process SIGTERM ended", async () => {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\nqueues.consumers = [{ queue = "jobs", max_batch_timeout = 0 }]\n`,
    "worker.js": `export default {
  async fetch(req, env) { await env.JOBS.send({ n: 1 }); return new Response("queued"); },
  async queue(batch) { console.log("handling"); await new Promise((r) => setTimeout(r, 600000)); },
};`,
  });
  const r = run(["dev", "--port", "0"], p.dir);
  const [, url] = await waitFor(r, /listening on (http:\/\/\S+)/);
  await fetch(url!, { method: "POST" });
  await waitFor(r, /handling/);
  r.kill("SIGTERM");
  await waitFor(r, /SIGTERM: stopping/);
  r.kill("SIGTERM");
  expect(await r.exited).toBe(143);
  expect(r.output()).toContain("SIGTERM again: exiting at once; messages in running batches return to their queues at the next start\n");
});

// The CLI runs crons by the real clock, so this one waits for the next whole minute: up to 60 s.
test.runIf(process.env.CELLD_SLOW === "1")("a second SIGINT during a cron run says the run is cut off", async () => {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\ntriggers = { crons = ["* * * * *"] }\n`,
    "worker.js": `export default {
  async fetch() { return new Response("ok"); },
  async scheduled() { console.log("cron running"); await new Promise((r) => setTimeout(r, 600000)); },
};`,
  });
  const r = run(["dev", "--port", "0"], p.dir);
  await waitFor(r, /listening on/);
  await waitFor(r, /cron running/, 65_000);
  r.kill("SIGINT");
  await waitFor(r, /SIGINT: stopping \(in-flight batches and cron runs get 10 s to finish\)/);
  r.kill("SIGINT");
  expect(await r.exited).toBe(130);
  expect(r.output()).toContain(
    "SIGINT again: exiting at once; messages in running batches return to their queues at the next start; " +
      "cron runs still going are cut off, not run again\n",
  );
}, 90_000);

/**
 * A Worker consuming `queues` with a queue() handler that logs and runs for ten minutes, each queue
 * already holding one message: `celld dev` starts delivering at once.
 */
async function runningBatchesProject(queues: string[]): Promise<Project> {
  const p = project();
  projects.push(p);
  const consumers = queues.map((q) => `[[queues.consumers]]\nqueue = "${q}"\nmax_batch_size = 1\nmax_batch_timeout = 0\n`);
  p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n${consumers.join("")}`,
    "worker.js": `export default {
  async fetch() { return new Response("ok"); },
  async queue(batch) {
    console.log("handling " + batch.queue + " attempt " + batch.messages[0].attempts);
    await new Promise((r) => setTimeout(r, 600000));
  },
};`,
  });
  const registry = new CellRegistry({ dataDir: p.dataDir });
  for (const queue of queues) await (await registry.open(queue)).send([{ body: new TextEncoder().encode("{}"), contentType: "json" }]);
  await registry.closeAll();
  return p;
}

/** Each queue's message, waiting again and not counted: its next delivery is its first. */
async function expectHandedBackUncounted(dataDir: string, queues: string[]): Promise<void> {
  const registry = new CellRegistry({ dataDir });
  try {
    for (const queue of queues) {
      const leased = await (await registry.open(queue)).lease({ max: 10, visibilityTimeoutSeconds: 30 });
      expect(leased.map((m) => m.deliveries), queue).toEqual([1]);
    }
  } finally {
    await registry.closeAll();
  }
}

test("a Ctrl-C while the consumers start, with the first batches running, stops in order and hands them back uncounted", async () => {
  // Many queues: setting up each consumer's cell takes a moment, and the first batches run meanwhile.
  const queues = Array.from({ length: 20 }, (_, i) => `q${i}`);
  const p = await runningBatchesProject(queues);
  const r = run(["dev", "--port", "0"], p.dir, { detached: true });
  await waitFor(r, /handling q\d+ attempt 1/);
  r.killGroup("SIGINT");
  expect(await r.exited).toBe(0);
  const output = r.output();
  expect(output).toContain("SIGINT: stopping");
  for (const [, queue] of output.matchAll(/handling (q\d+) attempt 1/g)) {
    expect(output).toMatch(new RegExp(`queue "${queue}": 1 message\\(s\\) (in flight|still in queue\\(\\) handlers) at shutdown handed back`));
  }
  await expectHandedBackUncounted(p.dataDir, queues);
});

test.runIf(process.platform === "linux")(
  "a Ctrl-C on a busy machine, workerd's end seen before celld's own SIGINT, is still a Ctrl-C: status 0, the batch handed back uncounted",
  async () => {
    const p = await runningBatchesProject(["jobs"]);
    const r = run(["dev", "--port", "0"], p.dir, { detached: true });
    await waitFor(r, /handling jobs attempt 1/);
    const workerd = childProcessesOf(r.pid).filter((c) => c.name.startsWith("workerd"));
    expect(workerd.length).toBeGreaterThan(0);
    // celld gets no CPU until workerd has ended of the same Ctrl-C: it then finds both at once.
    process.kill(r.pid, "SIGSTOP");
    r.killGroup("SIGINT");
    const end = Date.now() + 10_000;
    const alive = (pid: number): boolean => !["Z", undefined].includes(readProcess(pid)?.state);
    while (workerd.some((c) => alive(c.pid)) && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20));
    process.kill(r.pid, "SIGCONT");
    expect(await r.exited).toBe(0);
    const output = r.output();
    expect(output).not.toContain("exited unexpectedly");
    expect(output).toMatch(/queue "jobs": 1 message\(s\) (in flight|still in queue\(\) handlers) at shutdown handed back/);
    await expectHandedBackUncounted(p.dataDir, ["jobs"]);
  },
);
