import { expect, test } from "vitest";
import { eventually, tidyAfterEach } from "./host-harness.ts";

const tidy = tidyAfterEach();

const worker = `
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/through-binding") return env.ASSETS.fetch(new URL("/docs/guide.txt", request.url));
    return new Response("from the Worker: " + url.pathname);
  },
};
`;

function write(assets: string) {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "src/index.js"\ncompatibility_date = "2026-04-01"\n\n[assets]\ndirectory = "./public"\nbinding = "ASSETS"\n${assets}`,
    "src/index.js": worker,
    "public/index.html": "<h1>home</h1>\n",
    "public/docs/guide.txt": "the guide\n",
  });
  return { p, config };
}

test("[assets]: files in the directory are served in front of the Worker, other paths reach it, and env.ASSETS.fetch works", async () => {
  const { p, config } = write("");
  const h = await tidy.runHost([config], p.dataDir);
  const get = async (path: string) => {
    const response = await h.fetch(path);
    return [response.status, response.headers.get("content-type"), await response.text()];
  };
  expect(await get("/")).toEqual([200, "text/html; charset=utf-8", "<h1>home</h1>\n"]);
  expect(await get("/docs/guide.txt")).toEqual([200, "text/plain; charset=utf-8", "the guide\n"]);
  expect(await get("/api/items")).toEqual([200, "text/plain;charset=UTF-8", "from the Worker: /api/items"]);
  expect(await get("/through-binding")).toEqual([200, "text/plain; charset=utf-8", "the guide\n"]);
});

test("[assets] run_worker_first = true: every request reaches the Worker, which still has env.ASSETS", async () => {
  const { p, config } = write("run_worker_first = true\n");
  const h = await tidy.runHost([config], p.dataDir);
  expect(await (await h.fetch("/docs/guide.txt")).text()).toBe("from the Worker: /docs/guide.txt");
  expect(await (await h.fetch("/through-binding")).text()).toBe("the guide\n");
});

// Miniflare would send the host's queue() calls through its asset router, which drops them.
test("a consumer Worker's [assets] are left out, with a warning, and its batches still run", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "index.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1 }]
assets = { directory = "./public", binding = "ASSETS" }
`,
    "index.js": `export default {
  async fetch(request, env) { await env.JOBS.send("job"); return new Response(String(env.ASSETS)); },
  async queue(batch) { batch.ackAll(); },
};`,
    "public/index.html": "<h1>home</h1>",
  });
  const h = await tidy.runHost([config], p.dataDir);
  expect(await (await h.fetch("/")).text()).toBe("undefined");
  const report = await eventually(() => h.batches[0], "the batch");
  expect(report).toMatchObject({ queue: "jobs", size: 1, acked: 1, outcome: "ok" });
});
