import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { workerdChildren } from "../packages/runtime/src/workerd/workerd-orphans.ts";
import { deploy, kvMetadata, kvWorker, noSteps, startServeStack, steadyLoad, type ServeStack } from "./serve-harness.ts";

// celld serve's swap under load (docs/design-notes.md, "The swap without a gap"): deploys go
// through DeployService, as wrangler's upload does, while a steady stream of requests runs.

const stacks: ServeStack[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(stacks.splice(0).map((s) => s.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-swap-"));
  dirs.push(dir);
  return dir;
}

/**
 * Samples, every few ms, which storage files under `root` each workerd child of this process has
 * open; records any file two of them had open at the same moment.
 */
function watchStorageOpeners(root: string): { stop(): string[] } {
  const shared = new Set<string>();
  const timer = setInterval(() => {
    const owners = new Map<string, number>();
    for (const child of workerdChildren()) {
      let fds: string[];
      try {
        fds = readdirSync(`/proc/${child.pid}/fd`);
      } catch {
        continue;
      }
      for (const fd of fds) {
        let target: string;
        try {
          target = readlinkSync(`/proc/${child.pid}/fd/${fd}`);
        } catch {
          continue;
        }
        if (!target.startsWith(`${root}/`)) continue;
        const other = owners.get(target);
        if (other !== undefined && other !== child.pid) shared.add(target.slice(root.length + 1));
        owners.set(target, child.pid);
      }
    }
  }, 5);
  return {
    stop() {
      clearInterval(timer);
      return [...shared];
    },
  };
}

test.skipIf(process.platform !== "linux")(
  "200 requests/s through 10 deploys of a Worker that reads KV: none fails, storage has one opener",
  async () => {
    const dir = dataDir();
    const stack = await startServeStack(dir);
    stacks.push(stack);
    await deploy(stack, "hello", kvWorker(1), kvMetadata(true));
    const host = "hello.localhost";
    const put = await fetch(new URL("/put", stack.front.url), { headers: { host } });
    expect(await put.text()).toBe("ok");

    const openers = watchStorageOpeners(join(dir, "miniflare"));
    // One request in ten writes to the Durable Object; the others read KV.
    const load = steadyLoad(stack.front.url, host, 200, (i) => (i % 10 === 0 ? "/count" : "/"));
    const held: string[] = [];
    let lastDeployEnd = 0;
    const t0 = performance.now();
    for (let n = 2; n <= 11; n++) {
      await deploy(stack, "hello", kvWorker(n), kvMetadata(false));
      const swap = stack.runtime.lastSwap!;
      held.push(`${Math.round(swap.heldMs)} (in flight ${Math.round(swap.drainMs)})`);
      lastDeployEnd = performance.now() - t0;
    }
    // A second more of load on the last version, and at least 11 s of load in all (2,200
    // requests), however fast the deploys went on this machine.
    await new Promise((resolve) => setTimeout(resolve, Math.max(1_000, 11_000 - (performance.now() - t0))));
    const result = await load.stop();
    const shared = openers.stop();

    const failures = result.answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.body}`);
    expect(result.errors).toEqual([]);
    expect(failures.slice(0, 5)).toEqual([]);
    expect([...result.statuses.entries()]).toEqual([[200, result.sent]]);
    expect(result.sent).toBeGreaterThan(2_000);
    const reads = result.answers.filter((a) => !/^v\d+ \d+$/.test(a.body));
    for (const answer of reads) expect(answer.body).toMatch(/^v\d+ hello$/);
    const versions = new Set(result.answers.map((a) => Number(a.body.slice(1, a.body.indexOf(" ")))));
    expect([...versions].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    // Once a deploy has returned, new requests are answered by the new version alone.
    for (const answer of result.answers.filter((a) => a.sentAtMs > lastDeployEnd + 100)) expect(answer.body.startsWith("v11 ")).toBe(true);

    // The Durable Object's writes, across ten swaps: none lost, none twice.
    const ids = result.answers.filter((a) => /^v\d+ \d+$/.test(a.body)).map((a) => Number(a.body.split(" ")[1]));
    expect(new Set(ids).size).toBe(ids.length);
    const rows = await fetch(new URL("/rows", stack.front.url), { headers: { host } });
    expect(Number(await rows.text())).toBe(ids.length);

    expect(shared).toEqual([]);
    const slowest = Math.max(...result.answers.map((a) => a.answeredAtMs - a.sentAtMs));
    console.log(`swap under 200 req/s: ${result.sent} requests, 0 failed, slowest answer ${Math.round(slowest)} ms; requests held per deploy (ms): ${held.join(", ")}`);
  },
  300_000,
);

/** Version `n` of a Worker that sends on /send and consumes its queue slowly, recording what it got. */
function queueWorker(n: number): string {
  return `
import { DurableObject } from "cloudflare:workers";
export class Received extends DurableObject {
  add(ids, version) {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS got (id INTEGER PRIMARY KEY, version INTEGER, times INTEGER)");
    for (const id of ids) {
      this.ctx.storage.sql.exec("INSERT INTO got VALUES (?, ?, 1) ON CONFLICT(id) DO UPDATE SET times = times + 1", id, version);
    }
  }
  summary() {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS got (id INTEGER PRIMARY KEY, version INTEGER, times INTEGER)");
    return this.ctx.storage.sql.exec("SELECT id, version, times FROM got ORDER BY id").toArray();
  }
}
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/send") { await env.JOBS.send({ id: Number(url.searchParams.get("id")) }); return new Response("sent"); }
    return Response.json(await env.RECEIVED.get(env.RECEIVED.idFromName("r")).summary());
  },
  async queue(batch, env) {
    // Slow enough that batches are in flight whenever a swap comes.
    await scheduler.wait(300);
    await env.RECEIVED.get(env.RECEIVED.idFromName("r")).add(batch.messages.map((m) => m.body.id), ${n});
  },
};`;
}

function queueMetadata(first: boolean): Record<string, unknown> {
  return {
    bindings: [
      { type: "queue", name: "JOBS", queue_name: "jobs" },
      { type: "durable_object_namespace", name: "RECEIVED", class_name: "Received" },
    ],
    ...(first ? { migrations: { new_tag: "v1", steps: [{ ...noSteps, new_sqlite_classes: ["Received"] }] } } : {}),
  };
}

const jobsConsumer = {
  queue: "jobs",
  type: "worker" as const,
  visibilityTimeoutMs: undefined,
  maxBatchSize: 10,
  maxBatchTimeoutSeconds: 1,
  maxRetries: 3,
  retryDelaySeconds: 0,
  deadLetterQueue: undefined,
  maxConcurrency: 4,
};

test(
  "a queue consumer under load through 5 deploys: every message delivered once, batches finish on the old version",
  async () => {
    const stack = await startServeStack(dataDir(), (script) => (script === "jobs" ? [jobsConsumer] : []));
    stacks.push(stack);
    await deploy(stack, "jobs", queueWorker(1), queueMetadata(true));
    const host = "jobs.localhost";
    const load = steadyLoad(stack.front.url, host, 50, (i) => `/send?id=${i}`);
    let batchesAtStop = 0;
    for (let n = 2; n <= 6; n++) {
      await deploy(stack, "jobs", queueWorker(n), queueMetadata(false));
      batchesAtStop += stack.runtime.lastSwap!.batchesAtStop;
    }
    const result = await load.stop();
    expect(result.errors).toEqual([]);
    expect([...result.statuses.entries()]).toEqual([[200, result.sent]]);

    // Every message sent arrives, once: a batch in flight at a swap was finished by the old
    // version and acked, not handed back and delivered again.
    let got: Array<{ id: number; version: number; times: number }> = [];
    for (let waited = 0; waited < 60_000 && got.length < result.sent; waited += 250) {
      got = (await (await fetch(new URL("/summary", stack.front.url), { headers: { host } })).json()) as typeof got;
      if (got.length < result.sent) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(got.map((r) => r.id)).toEqual([...Array(result.sent).keys()]);
    expect(got.filter((r) => r.times !== 1)).toEqual([]);
    // Batches were running when swaps began (and finished where they ran, as the count of one shows).
    expect(batchesAtStop).toBeGreaterThan(0);
    // Several versions consumed: the load ran across the swaps.
    expect(new Set(got.map((r) => r.version)).size).toBeGreaterThan(2);
    const cell = await stack.registry.open("jobs");
    expect(await cell.counts()).toMatchObject({ ready: 0, delayed: 0, leased: 0, dead: 0 });
  },
  300_000,
);

test("two deploys of one Worker racing: one wins whole, the other gets a conflict and changes nothing", async () => {
  const stack = await startServeStack(dataDir());
  stacks.push(stack);
  const source = (text: string) => `export default { fetch() { return new Response(${JSON.stringify(text)}) } }`;
  await deploy(stack, "racer", source("first"), {});
  const before = stack.service.store.versions("racer").length;
  const outcomes = await Promise.allSettled([deploy(stack, "racer", source("a"), {}), deploy(stack, "racer", source("b"), {})]);
  const won = outcomes.findIndex((o) => o.status === "fulfilled");
  const lost = outcomes.find((o) => o.status === "rejected");
  expect(won).toBeGreaterThanOrEqual(0);
  expect(lost?.status === "rejected" ? lost.reason : undefined).toMatchObject({ code: 10013, status: 409, message: expect.stringMatching(/another change to Worker "racer"/) });
  // The winner runs and is the active deployment; the loser left no version behind.
  expect(stack.service.store.versions("racer")).toHaveLength(before + 1);
  const answer = await fetch(stack.front.url, { headers: { host: "racer.localhost" } });
  expect(await answer.text()).toBe(won === 0 ? "a" : "b");

  // Deploys of two different Workers do not conflict: they take turns, and both are active.
  await Promise.all([deploy(stack, "racer", source("c"), {}), deploy(stack, "other", source("o"), {})]);
  expect(stack.service.store.scripts()).toEqual(["other", "racer"]);
  expect(stack.service.store.active("racer")?.version.id).toBe(stack.service.store.versions("racer")[0]?.id);
  expect(stack.runtime.workers.map((w) => w.name)).toEqual(["other", "racer"]);
}, 120_000);

test("a version that throws at load is refused while the old one serves on, under load, none failing", async () => {
  const stack = await startServeStack(dataDir());
  stacks.push(stack);
  await deploy(stack, "hello", `export default { fetch() { return new Response("v1") } }`, {});
  const load = steadyLoad(stack.front.url, "hello.localhost", 100, () => "/");
  await expect(deploy(stack, "hello", `throw new Error("broken at load"); export default {}`, {})).rejects.toMatchObject({
    code: 10021,
    message: expect.stringMatching(/broken at load/),
  });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const result = await load.stop();
  expect(result.errors).toEqual([]);
  expect(result.answers.every((a) => a.status === 200 && a.body === "v1")).toBe(true);
  expect(stack.service.store.versions("hello")).toHaveLength(1);
}, 120_000);
