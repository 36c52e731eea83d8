import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { afterEach, expect, test } from "vitest";
import { workerdChildren } from "../packages/runtime/src/workerd/workerd-orphans.ts";

// What workerd does when two Miniflare instances (two workerd processes) run on one persist
// directory, as two versions of a deployment would if the new one started beside the old on the
// same storage. The answers shape celld serve's swap (docs/design-notes.md, "The swap without a
// gap"): storage must be handed over, not shared. Each case here is deterministic; what
// concurrent writers meet (SQLITE_BUSY errors) is recorded in the design notes, not asserted.

const script = `
import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject {
  inMemory = 0;
  countInMemory() { return ++this.inMemory; }
  async countInStorage() {
    const n = ((await this.ctx.storage.get("n")) ?? 0) + 1;
    await this.ctx.storage.put("n", n);
    return n;
  }
  countInSql() {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS c (n INTEGER)");
    if (this.ctx.storage.sql.exec("SELECT count(*) AS k FROM c").one().k === 0) this.ctx.storage.sql.exec("INSERT INTO c VALUES (0)");
    return this.ctx.storage.sql.exec("UPDATE c SET n = n + 1 RETURNING n").one().n;
  }
}
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const counter = env.COUNTER.get(env.COUNTER.idFromName("one"));
    switch (url.pathname) {
      case "/memory": return new Response(String(await counter.countInMemory()));
      case "/storage": return new Response(String(await counter.countInStorage()));
      case "/sql": return new Response(String(await counter.countInSql()));
      case "/kv-put": await env.KV.put("k", url.searchParams.get("v")); return new Response("ok");
      case "/kv-get": return new Response(String(await env.KV.get("k")));
      case "/d1": {
        await env.DB.exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)");
        await env.DB.prepare("INSERT INTO t VALUES (1)").run();
        return new Response(String((await env.DB.prepare("SELECT count(*) AS k FROM t").first()).k));
      }
    }
    return new Response("?", { status: 404 });
  },
};`;

let dir: string | undefined;
const started: Miniflare[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((mf) => mf.dispose()));
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

async function startOn(persist: string): Promise<{ mf: Miniflare; pid: number }> {
  const before = new Set(workerdChildren().map((p) => p.pid));
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: "2025-01-01",
    cf: false,
    kvNamespaces: { KV: "kv1" },
    d1Databases: { DB: "db1" },
    durableObjects: { COUNTER: { className: "Counter", useSQLite: true } },
    defaultPersistRoot: persist,
  });
  started.push(mf);
  await mf.ready;
  const pid = workerdChildren().find((p) => !before.has(p.pid))?.pid;
  if (pid === undefined) throw new Error("no new workerd child");
  return { mf, pid };
}

/** The files under `root` that process `pid` has open, relative to `root`. */
function openFilesUnder(pid: number, root: string): string[] {
  const open: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith(`${root}/`) && target.endsWith(".sqlite")) open.push(target.slice(root.length + 1));
    } catch {
      // closed meanwhile
    }
  }
  return open.sort();
}

async function text(mf: Miniflare, path: string): Promise<string> {
  return (await mf.dispatchFetch(`http://x${path}`)).text();
}

/** Alternates `path` between the two, five times each: what each answered, in order. */
async function alternate(a: Miniflare, b: Miniflare, path: string): Promise<string[]> {
  const answers: string[] = [];
  for (let i = 0; i < 5; i++) {
    answers.push(`A${await text(a, path)}`);
    answers.push(`B${await text(b, path)}`);
  }
  return answers;
}

test.skipIf(process.platform !== "linux")("two workerd on one persist directory share its SQLite files, and a Durable Object runs twice", async () => {
  dir = mkdtempSync(join(tmpdir(), "celld-shared-persist-"));
  const a = await startOn(dir);
  const b = await startOn(dir);

  // Nothing refuses the second; and before any request, each has opened every storage
  // namespace's metadata.sqlite (workerd's alarm index) for writing.
  const metadata = ["cache/miniflare-CacheObject/metadata.sqlite", "d1/miniflare-D1DatabaseObject/metadata.sqlite", "do/-Counter/metadata.sqlite", "kv/miniflare-KVNamespaceObject/metadata.sqlite"];
  expect(openFilesUnder(a.pid, dir)).toEqual(metadata);
  expect(openFilesUnder(b.pid, dir)).toEqual(metadata);

  // KV and D1 read the files on each call: one sees the other's writes (one at a time).
  await text(a.mf, "/kv-put?v=from-a");
  expect(await text(b.mf, "/kv-get")).toBe("from-a");
  expect(await alternate(a.mf, b.mf, "/d1")).toEqual(["A1", "B2", "A3", "B4", "A5", "B6", "A7", "B8", "A9", "B10"]);
  // A Durable Object's SQL, one statement at a time, too.
  expect(await alternate(a.mf, b.mf, "/sql")).toEqual(["A1", "B2", "A3", "B4", "A5", "B6", "A7", "B8", "A9", "B10"]);

  // But one Durable Object id now has two live instances, one in each process: the guarantee
  // that an object runs once is gone, its memory forks...
  expect(await alternate(a.mf, b.mf, "/memory")).toEqual(["A1", "B1", "A2", "B2", "A3", "B3", "A4", "B4", "A5", "B5"]);
  // ...and its storage API loses an update: ten increments, one after another, end at nine.
  const storage = await alternate(a.mf, b.mf, "/storage");
  expect(storage.at(-1)).toBe("B9");
  expect(new Set(storage.map((s) => s.slice(1))).size).toBeLessThan(storage.length);
});
