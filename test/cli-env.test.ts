import { afterEach, expect, test } from "vitest";
import { run, waitFor } from "./cli-harness.ts";
import { project, type Project } from "./host-harness.ts";

const projects: Project[] = [];
afterEach(() => projects.splice(0).forEach((p) => p.remove()));

/**
 * A Worker whose top level and `[env.production]` differ in every way a user would notice: vars,
 * the queue it produces to and consumes, and the KV namespace its consumer records into.
 */
const config = `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
vars = { MODE = "top" }
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_timeout = 0 }]
kv_namespaces = [{ binding = "SEEN", id = "seen-top" }]

[env.production]
vars = { MODE = "production" }
queues.producers = [{ binding = "JOBS", queue = "jobs-prod" }]
queues.consumers = [{ queue = "jobs-prod", max_batch_timeout = 0 }]
kv_namespaces = [{ binding = "SEEN", id = "seen-prod" }]

[env.staging]
vars = { MODE = "staging" }
`;

const worker = `export default {
  async fetch(req, env) {
    if (req.method === "POST") { await env.JOBS.send({ mode: env.MODE }); return new Response("sent"); }
    return Response.json({ mode: env.MODE, secret: env.SECRET ?? null, seen: await env.SEEN.get("last", "json") });
  },
  async queue(batch, env) {
    for (const m of batch.messages) { await env.SEEN.put("last", JSON.stringify({ queue: batch.queue, body: m.body })); m.ack(); }
  },
};`;

function envProject(): Project {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": config,
    "worker.js": worker,
    ".dev.vars": "SECRET=plain\n",
    ".dev.vars.production": "SECRET=production\n",
  });
  return p;
}

test("celld dev --env production runs the section through workerd: its vars, .dev.vars.production, queues and KV, as app-production", async () => {
  const p = envProject();
  const r = run(["dev", "--port", "0", "--env", "production"], p.dir);
  try {
    const [, url] = await waitFor(r, /Worker "app-production" listening on (http:\/\/\S+)/);
    expect(r.output()).toContain('environment "production": Workers "app-production"');
    // The banner's queues line comes after the listening line: waited for, not read at once (it
    // was not yet there in one fresh-clone CI run).
    await waitFor(r, /queues: jobs-prod\n/);
    expect(await (await fetch(url!, { method: "POST" })).text()).toBe("sent");
    let state: { mode: string; secret: string; seen: unknown } | undefined;
    for (const end = Date.now() + 20_000; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 50))) {
      state = (await (await fetch(url!)).json()) as typeof state;
      if (state?.seen !== null) break;
    }
    expect(state).toEqual({ mode: "production", secret: "production", seen: { queue: "jobs-prod", body: { mode: "production" } } });
  } finally {
    r.kill("SIGINT");
    await r.exited;
  }
});

test("an environment no config defines exits 78, naming the file and the environments it defines", async () => {
  const p = envProject();
  const r = run(["dev", "--port", "0", "-e", "prod"], p.dir);
  expect(await r.exited).toBe(78);
  expect(r.output()).toContain(
    'wrangler.toml: --env prod: this file defines no environment of that name; it defines "production", "staging" (add [env.prod] to run it)',
  );
});

test("switching environments on one data directory: the banner counts the other environment's queue files as in no config here", async () => {
  const p = envProject();
  const top = run(["dev", "--port", "0"], p.dir);
  await waitFor(top, /queues: jobs\n/);
  top.kill("SIGINT");
  expect(await top.exited).toBe(0);
  const production = run(["dev", "--port", "0", "--env", "production"], p.dir);
  try {
    const [line] = await waitFor(production, /data directory: .*\n/);
    expect(line).toMatch(/\(2 queues on disk, [^;]+; 1 of them in no config of this deployment, kept as they are\)\n$/);
  } finally {
    production.kill("SIGINT");
    await production.exited;
  }
});
