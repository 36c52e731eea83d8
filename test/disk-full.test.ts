import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { drainJson, tidyAfterEach, type RunningHost } from "./host-harness.ts";

// A real full disk: the data directory on a small tmpfs the test mounts (as root). Where it
// cannot mount one (not root, no mount(8), a container without the capability), it says why and
// skips; storage-failure.test.ts in queue-cell covers the words with an injected failure.

const tidy = tidyAfterEach();
let mountPoint: string | undefined;
let cannotMount = "";

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), "celld-disk-full-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=24m", "tmpfs", dir], { stdio: "pipe" });
    mountPoint = dir;
  } catch (error) {
    cannotMount = String((error as { stderr?: Buffer }).stderr ?? error).trim();
  }
});

afterAll(() => {
  if (mountPoint !== undefined) execFileSync("umount", ["-l", mountPoint]);
  if (mountPoint !== undefined) rmSync(mountPoint, { recursive: true, force: true });
});

const worker = `export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const from = Number(url.searchParams.get("from"));
    const count = Number(url.searchParams.get("count"));
    const pad = "x".repeat(Number(url.searchParams.get("pad") ?? "0"));
    try {
      await env.JOBS.sendBatch(Array.from({ length: count }, (_, i) => ({ body: { n: from + i, pad } })));
      return new Response("ok");
    } catch (error) {
      return new Response(String(error), { status: 500 });
    }
  },
};`;

/** Fills the file system at `dir` to the last byte; returns the filler's path. */
function fill(dir: string): string {
  const path = join(dir, "filler");
  const fd = openSync(path, "w");
  try {
    for (const size of [1 << 20, 1 << 12, 1]) {
      const chunk = Buffer.alloc(size, 1);
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (error) {
          if ((error as { code?: string }).code !== "ENOSPC") throw error;
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

async function sendBatch(h: RunningHost, from: number, count: number, pad: number): Promise<[number, string]> {
  const response = await h.fetch(`/?from=${from}&count=${count}&pad=${pad}`);
  return [response.status, await response.text()];
}

test("a full disk: sendBatch is refused with 15000 and writes nothing; writes resume with space; a restart finds exactly the acknowledged", async (context) => {
  if (mountPoint === undefined) {
    context.skip(`no tmpfs could be mounted here (${cannotMount})`);
    return;
  }
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\n`,
    "index.js": worker,
  });
  const dataDir = join(mountPoint, "data");
  let h = await tidy.runHost([config], dataDir);
  expect(await sendBatch(h, 0, 10, 100)).toEqual([200, "ok"]);

  const filler = fill(mountPoint);
  // Large enough to need new pages in the queue's log, which has no room left.
  const [status, text] = await sendBatch(h, 10, 100, 2_000);
  expect(status).toBe(500);
  expect(text).toBe(
    "Error: UnknownInternalError: the queue's storage failed: database or disk is full (SQLITE_FULL); nothing of this " +
      "call was written, and writes resume by themselves once the disk has free space (15000)",
  );
  expect(await (await h.cell("jobs")).counts()).toMatchObject({ ready: 10 });
  expect(h.log.lines.some((l) => l.includes("a Worker's send was refused") && l.includes("disk"))).toBe(true);

  rmSync(filler);
  expect(await sendBatch(h, 10, 100, 2_000)).toEqual([200, "ok"]);
  await h.close();

  h = await tidy.runHost([config], dataDir);
  const bodies = (await drainJson(await h.cell("jobs"))) as { n: number }[];
  expect(bodies.map((b) => b.n).sort((a, b) => a - b)).toEqual(Array.from({ length: 110 }, (_, i) => i));
  await h.close();
});
