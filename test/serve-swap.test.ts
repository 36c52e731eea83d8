import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { workerdChildren } from "../packages/runtime/src/workerd/workerd-orphans.ts";
import { deploy, startServeStack, steadyLoad, type ServeStack } from "./serve-harness.ts";

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

/** Version `n` of a Worker that reads KV on every request and counts in a Durable Object. */
function kvWorker(n: number): string {
  return `
import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject {
  add() {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS hits (id INTEGER PRIMARY KEY AUTOINCREMENT)");
    return this.ctx.storage.sql.exec("INSERT INTO hits DEFAULT VALUES RETURNING id").one().id;
  }
  rows() {
    return this.ctx.storage.sql.exec("SELECT count(*) AS n FROM hits").one().n;
  }
}
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const counter = env.COUNTER.get(env.COUNTER.idFromName("one"));
    if (url.pathname === "/put") { await env.KV.put("greeting", "hello"); return new Response("ok"); }
    if (url.pathname === "/count") return new Response("v${n} " + (await counter.add()));
    if (url.pathname === "/rows") return new Response(String(await counter.rows()));
    return new Response("v${n} " + (await env.KV.get("greeting")));
  },
};`;
}

const noSteps = { new_classes: [], new_sqlite_classes: [], renamed_classes: [], deleted_classes: [], transferred_classes: [] };
function kvMetadata(first: boolean): Record<string, unknown> {
  return {
    bindings: [
      { type: "kv_namespace", name: "KV", namespace_id: "kv1" },
      { type: "durable_object_namespace", name: "COUNTER", class_name: "Counter" },
    ],
    ...(first ? { migrations: { new_tag: "v1", steps: [{ ...noSteps, new_sqlite_classes: ["Counter"] }] } } : {}),
  };
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
    const held: number[] = [];
    let lastDeployEnd = 0;
    const t0 = performance.now();
    for (let n = 2; n <= 11; n++) {
      await deploy(stack, "hello", kvWorker(n), kvMetadata(false));
      held.push(Math.round(stack.runtime.lastSwap!.heldMs));
      lastDeployEnd = performance.now() - t0;
    }
    // A second more of load on the last version.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const result = await load.stop();
    const shared = openers.stop();

    expect(result.errors).toEqual([]);
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
