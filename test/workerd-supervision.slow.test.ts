import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { CellRegistry } from "../packages/queue-cell/src/index.ts";
import { run, waitFor, type Run } from "./cli-harness.ts";
import { childProcessesOf, drainJson, project, type Project } from "./host-harness.ts";

// `celld dev` as a user runs it, with workerd killed under it (kill -9) on the real clock.

const projects: Project[] = [];
const runs: Run[] = [];
afterEach(async () => {
  for (const r of runs.splice(0)) {
    r.kill("SIGKILL");
    await r.exited;
  }
  projects.splice(0).forEach((p) => p.remove());
});

function loadProject(): Project {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "SEEN", queue = "seen" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 20, max_batch_timeout = 0, max_retries = 10 }]
`,
    // Each message delivered is recorded in "seen" (no consumer) before it is acked.
    "worker.js": `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/send") {
      await env.JOBS.send({ n: Number(url.searchParams.get("n")) });
      return new Response("ok");
    }
    const [jobs, seen] = await Promise.all([env.JOBS.metrics(), env.SEEN.metrics()]);
    return Response.json({ jobs: jobs.backlogCount, seen: seen.backlogCount });
  },
  async queue(batch, env) {
    await env.SEEN.sendBatch(batch.messages.map((m) => ({ body: m.body })));
    batch.ackAll();
  },
};`,
  });
  return p;
}

function workerdOf(r: Run): number[] {
  return childProcessesOf(r.pid)
    .filter((c) => c.name.startsWith("workerd"))
    .map((c) => c.pid);
}

test.runIf(process.platform === "linux")(
  "kill -9 of workerd under a steady load of sends and deliveries: back within seconds, the load resumes, every acknowledged send is delivered",
  async () => {
    const p = loadProject();
    const data = join(p.dir, "data");
    const r = run(["dev", "--port", "0", "--data", data], p.dir);
    runs.push(r);
    const [, url] = await waitFor(r, /listening on (http:\/\/\S+)/, 90_000);
    const acknowledged = new Set<number>();
    let next = 0;
    let sending = true;
    const sender = async () => {
      while (sending) {
        const n = next++;
        try {
          const response = await fetch(new URL(`/send?n=${n}`, url), { signal: AbortSignal.timeout(5_000) });
          if (response.ok && (await response.text()) === "ok") acknowledged.add(n);
        } catch {
          // workerd is down: this send was not acknowledged.
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
    };
    const senders = Array.from({ length: 4 }, sender);
    while (acknowledged.size < 50) await new Promise((resolve) => setTimeout(resolve, 50));

    const killedAt = Date.now();
    for (const pid of workerdOf(r)) process.kill(pid, "SIGKILL");
    await waitFor(r, /started again \(restart 1\): the Workers serve again/, 30_000, 10);
    const backAfterMs = Date.now() - killedAt;
    const atRestart = acknowledged.size;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    sending = false;
    await Promise.all(senders);
    // The load resumed: sends were acknowledged after the restart.
    expect(acknowledged.size).toBeGreaterThan(atRestart + 10);
    // "A few seconds" on a machine shared with other test runs.
    expect(backAfterMs).toBeLessThan(10_000);
    console.log(`workerd back ${backAfterMs} ms after kill -9; ${acknowledged.size} sends acknowledged of ${next}`);

    // Every acknowledged send reaches the consumer (at least once): wait until jobs is empty.
    const end = Date.now() + 60_000;
    for (;;) {
      const backlog = (await (await fetch(new URL("/backlog", url))).json()) as { jobs: number; seen: number };
      if (backlog.jobs === 0 && backlog.seen >= acknowledged.size) break;
      if (Date.now() > end) throw new Error(`not all delivered: ${JSON.stringify(backlog)}, ${acknowledged.size} acknowledged`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    r.kill("SIGTERM");
    expect(await r.exited).toBe(0);
    const registry = new CellRegistry({ dataDir: data });
    try {
      const seen = new Set(((await drainJson(await registry.open("seen"))) as { n: number }[]).map((m) => m.n));
      const lost = [...acknowledged].filter((n) => !seen.has(n));
      expect(lost).toEqual([]);
    } finally {
      await registry.closeAll();
    }
  },
  180_000,
);

test.runIf(process.platform === "linux")(
  "five exits of workerd within a minute stop celld dev with status 1 and the reason",
  async () => {
    const p = loadProject();
    const data = join(p.dir, "data");
    const r = run(["dev", "--port", "0", "--data", data], p.dir);
    runs.push(r);
    const [, url] = await waitFor(r, /listening on (http:\/\/\S+)/, 90_000);
    for (let i = 1; i <= 4; i++) {
      for (const pid of workerdOf(r)) process.kill(pid, "SIGKILL");
      await waitFor(r, new RegExp(`started again \\(restart ${i}\\)`), 30_000, 10);
    }
    expect(await (await fetch(new URL("/backlog", url))).json()).toEqual({ jobs: 0, seen: 0 });
    for (const pid of workerdOf(r)) process.kill(pid, "SIGKILL");
    expect(await r.exited).toBe(1);
    const output = r.output();
    expect(output).toContain(
      "[celld] error: workerd (the Workers runtime) exited unexpectedly (killed by SIGKILL (9)), its failure 5 within 60 s: " +
        "celld stops rather than start it again",
    );
    expect(output).toContain("[celld] workerd exited too often: stopping");
    expect(output).toMatch(/\[celld\] stopped\n/);
  },
  180_000,
);
