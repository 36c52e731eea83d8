import { get } from "node:http";
import { join } from "node:path";
import { CellRegistry, systemClock } from "@celld/queue-cell";
import { expect, test } from "vitest";
import { ApiKeyStore } from "../packages/runtime/src/api/index.ts";
import { DeployStore } from "../packages/runtime/src/deploy/deploy-store.ts";
import { childProcesses } from "../packages/runtime/src/workerd/workerd-orphans.ts";
import type { Run } from "./cli-harness.ts";
import { serveScratchAfterEach } from "./serve-cli.ts";
import { uploadBody } from "./serve-harness.ts";

// `kill -9` of `celld serve` at moments spread over a deploy (start check, hold, stop, start,
// record): each restart runs the old version or the new, whole, never code of one with the
// bindings of the other, and every message whose send a Worker saw acknowledged is in its queue.

const rounds = process.env.CELLD_SLOW === undefined ? 4 : 8;

/**
 * Where in a deploy the kill lands, told by what celld serve's process shows: a second workerd
 * (the start check), no workerd at all (storage handed over: the old one stopped, the new not yet
 * started), the swap's log line (the new one runs; the store does not name it yet), or a moment
 * after the upload began.
 */
type Stage = "check" | "handoff" | "swapped" | "early";
const stages: Stage[] = ["check", "handoff", "swapped", "early"];

function workerdOf(pid: number): number {
  return childProcesses(pid).filter((p) => p.name.startsWith("workerd")).length;
}

const swaps = (serve: Run): number => serve.output().split("Workers swapped").length - 1;

async function reach(serve: Run, stage: Stage, swapsBefore: number): Promise<boolean> {
  const end = Date.now() + 60_000;
  let saw = workerdOf(serve.pid);
  while (Date.now() < end) {
    const now = workerdOf(serve.pid);
    if (stage === "early") {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return true;
    }
    if (stage === "check" && now >= 2) return true;
    if (stage === "handoff" && now === 0 && saw > 0) return true;
    if (stage === "swapped" && swaps(serve) > swapsBefore) return true;
    saw = Math.max(saw, now);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return false;
}

const scratch = serveScratchAfterEach("SIGKILL");

/** Version `n`: its code and its VERSION binding both say n; a mix would answer two numbers. */
function version(n: number): { source: string; metadata: Record<string, unknown> } {
  return {
    source: `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/send") { await env.JOBS.send({ id: Number(url.searchParams.get("id")) }); return new Response("sent"); }
    return new Response("code ${n} binding " + env.VERSION);
  },
};`,
    metadata: {
      bindings: [
        { type: "plain_text", name: "VERSION", text: String(n) },
        { type: "queue", name: "JOBS", queue_name: "jobs" },
      ],
    },
  };
}

function bodyAsHost(url: string, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    get(new URL(path, url), { headers: { host: "hello.localhost" } }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    }).on("error", reject);
  });
}

const startServeWith = (extraArgs: string[]) => (dataDir: string) => scratch.startServe(dataDir, { extraArgs, timeoutMs: 120_000 });

async function putScript(api: string, key: string, n: number): Promise<Response> {
  const { source, metadata } = version(n);
  const { body, contentType } = await uploadBody(source, metadata);
  return fetch(`${api}/client/v4/accounts/acme/workers/scripts/hello`, {
    method: "PUT",
    headers: { authorization: `Bearer ${key}`, "content-type": contentType },
    body,
  });
}

/** The version the store's active deployment names: what a restart must run, whole. */
function activeVersion(dataDir: string): number {
  const active = new DeployStore(dataDir).active("hello");
  const binding = active?.version.bindings.find((b) => b.name === "VERSION") as { text?: string } | undefined;
  return Number(binding?.text);
}

// The same with the cells on worker threads: a kill lands on sends in flight on the threads too.
test.each([
  ["cells on the main thread", []],
  ["cells on 2 threads (--cell-threads 2)", ["--cell-threads", "2"]],
])(`kill -9 during ${rounds} deploys, %s: a restart runs one version whole; no acknowledged send is lost`, async (_what, extraArgs) => {
  const startServe = startServeWith(extraArgs);
  const dataDir = scratch.tempDir("celld-serve-crash-");
  const keys = ApiKeyStore.open(dataDir);
  const { key } = keys.create({ env: "orgs/acme/projects/web/envs/prod", scopes: ["workers:write", "workers:read"] });
  keys.close();

  let { serve, workers, api } = await startServe(dataDir);
  expect((await putScript(api, key, 1)).status).toBe(200);
  const acked = new Set<number>();
  let nextId = 0;
  const outcomes: string[] = [];
  for (let round = 1; round <= rounds; round++) {
    // What runs now is the active deployment, whole.
    const expected = activeVersion(dataDir);
    expect((await bodyAsHost(workers, "/")).text).toBe(`code ${expected} binding ${expected}`);

    // Sends at about 50/s while a deploy of the next version runs; celld is killed part way.
    let sending = true;
    const ackedBefore = acked.size;
    const sender = (async () => {
      while (sending) {
        const id = nextId++;
        const answer = await bodyAsHost(workers, `/send?id=${id}`).catch(() => undefined);
        if (answer?.status === 200 && answer.text === "sent") acked.add(id);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const stage = stages[(round - 1) % stages.length]!;
    const swapsBefore = swaps(serve);
    const deploying = putScript(api, key, round + 1).catch(() => undefined);
    const reached = await reach(serve, stage, swapsBefore);
    serve.kill("SIGKILL");
    await serve.exited;
    scratch.forget(serve);
    sending = false;
    await sender;
    const answered = await deploying;
    expect(reached, `stage ${stage} of round ${round}`).toBe(true);
    // Sends were acknowledged in this round, before or during its deploy.
    expect(acked.size, `acknowledged sends in round ${round}`).toBeGreaterThan(ackedBefore);
    outcomes.push(`at ${stage}: deploy ${answered === undefined ? "cut" : answered.status}, runs v${activeVersion(dataDir)}`);

    ({ serve, workers, api } = await startServe(dataDir));
  }
  const last = activeVersion(dataDir);
  expect((await bodyAsHost(workers, "/")).text).toBe(`code ${last} binding ${last}`);
  serve.kill("SIGTERM");
  expect(await serve.exited).toBe(0);
  scratch.forget(serve);

  // Every acknowledged send is in the queue (a send whose answer was cut may be there too).
  const registry = new CellRegistry({ dataDir, clock: systemClock, durability: "full" });
  try {
    const cell = await registry.open("jobs");
    const found = new Set<number>();
    for (;;) {
      const batch = await cell.lease({ max: 100, visibilityTimeoutSeconds: 600 });
      if (batch.length === 0) break;
      for (const m of batch) found.add((JSON.parse(Buffer.from(m.body).toString()) as { id: number }).id);
    }
    expect([...acked].filter((id) => !found.has(id))).toEqual([]);
  } finally {
    await registry.closeAll();
  }
  console.log(`kill -9 during deploys: ${outcomes.join("; ")}; ${acked.size} acknowledged sends, none lost`);
}, 1_200_000);
