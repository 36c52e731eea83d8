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

test("[assets] run_worker_first route rules: matched paths reach the Worker first, a negative rule keeps the files", async () => {
  const { p, config } = write('run_worker_first = ["/docs/*", "!/docs/guide.txt"]\n');
  const h = await tidy.runHost([config], p.dataDir);
  const text = async (path: string) => (await h.fetch(path)).text();
  expect(await text("/docs/other.txt")).toBe("from the Worker: /docs/other.txt");
  expect(await text("/docs/guide.txt")).toBe("the guide\n");
  expect(await text("/")).toBe("<h1>home</h1>\n");
  expect(await text("/api/items")).toBe("from the Worker: /api/items");
});

// Miniflare sends a service binding to a Worker with assets through its asset router, which has
// no queue(): the dispatch Worker names the default entrypoint to go around it.
test("a consumer Worker with [assets] serves its files and runs its batches", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "index.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0 }]
assets = { directory = "./public", binding = "ASSETS" }
`,
    "index.js": `export default {
  async fetch(request, env) {
    await env.JOBS.send("job");
    const file = await env.ASSETS.fetch(new URL("/index.html", request.url));
    return new Response("sent; the binding reads: " + (await file.text()));
  },
  async queue(batch) { batch.ackAll(); },
};`,
    "public/index.html": "<h1>home</h1>",
  });
  const h = await tidy.runHost([config], p.dataDir);
  expect(await (await h.fetch("/")).text()).toBe("<h1>home</h1>");
  expect(await (await h.fetch("/send")).text()).toBe("sent; the binding reads: <h1>home</h1>");
  const report = await eventually(() => h.batches[0], "the batch");
  expect(report).toMatchObject({ queue: "jobs", size: 1, acked: 1, outcome: "ok" });
});

// Miniflare names every Worker's asset store alike; miniflare-assets-wiring.ts gives each its own.
test("two Workers with [assets] each serve their own files, the second through a service binding", async () => {
  const p = tidy.project();
  const web = p.write({
    "web/wrangler.toml": `name = "web"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\nassets = { directory = "./public" }\nservices = [{ binding = "DOCS", service = "docs" }]\n`,
    "web/index.js": `export default { fetch(request, env) { return env.DOCS.fetch(request); } };`,
    "web/public/index.html": "web home",
    "web/public/only-web.txt": "web's file",
  });
  const docs = p.write({
    "docs/wrangler.toml": `name = "docs"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\nassets = { directory = "./public" }\n`,
    "docs/index.js": `export default { fetch(request) { return new Response("the docs Worker: " + new URL(request.url).pathname); } };`,
    "docs/public/index.html": "docs home",
    "docs/public/only-docs.txt": "docs' file",
  });
  const h = await tidy.runHost([web, docs], p.dataDir);
  const text = async (path: string) => (await h.fetch(path)).text();
  expect(await text("/")).toBe("web home");
  expect(await text("/only-web.txt")).toBe("web's file");
  // Not web's file: through web's Worker to docs, whose router answers from docs' directory.
  expect(await text("/only-docs.txt")).toBe("docs' file");
  expect(await text("/elsewhere")).toBe("the docs Worker: /elsewhere");
});

test("a consumer whose default export is a WorkerEntrypoint class, with [assets], serves its files and runs its batches", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\nqueues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0 }]\nassets = { directory = "./public" }\n`,
    "index.js": `import { WorkerEntrypoint } from "cloudflare:workers";
export default class extends WorkerEntrypoint {
  async fetch() { await this.env.JOBS.send("job"); return new Response("sent"); }
  async queue(batch) { batch.ackAll(); }
}`,
    "public/index.html": "<h1>home</h1>",
  });
  const h = await tidy.runHost([config], p.dataDir);
  expect(await (await h.fetch("/")).text()).toBe("<h1>home</h1>");
  expect(await (await h.fetch("/send")).text()).toBe("sent");
  expect(await eventually(() => h.batches[0], "the batch")).toMatchObject({ queue: "jobs", acked: 1, outcome: "ok" });
});

// A service-worker script has no named entrypoint to go around the asset router through.
test("a service-worker consumer's [assets] are left out, with a warning, and its batches still run", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\nqueues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0 }]\nassets = { directory = "./public", binding = "ASSETS" }\n`,
    "index.js": `addEventListener("fetch", (event) => event.respondWith(JOBS.send("job").then(() => new Response(typeof ASSETS))));
addEventListener("queue", (event) => event.ackAll());`,
    "public/index.html": "<h1>home</h1>",
  });
  const h = await tidy.runHost([config], p.dataDir);
  expect(h.log.lines.some((l) => l.includes("assets: are not served (and env.ASSETS is undefined): Worker \"app\" consumes queues and is a service-worker script"))).toBe(true);
  expect(await (await h.fetch("/")).text()).toBe("undefined");
  expect(await eventually(() => h.batches[0], "the batch")).toMatchObject({ queue: "jobs", acked: 1, outcome: "ok" });
});
