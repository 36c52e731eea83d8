/**
 * `celld dev --watch` through the real CLI: a change to a Worker's source, its config or its dev
 * vars restarts the Workers on the same data directory; a change that does not load or bundle
 * leaves the running ones as they were.
 */
import { afterEach, expect, test } from "vitest";
import { run, waitFor, type Run } from "./cli-harness.ts";
import { project, type Project } from "./host-harness.ts";

const projects: Project[] = [];
afterEach(() => projects.splice(0).forEach((p) => p.remove()));

/** Waits until `pattern` (global) has matched the output `count` times. */
async function waitForCount(r: Run, pattern: RegExp, count: number, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while ((r.output().match(pattern) ?? []).length < count) {
    if (Date.now() > end) throw new Error(`${pattern} not seen ${count} times in:\n${r.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const config = (maxBatchSize: number) => `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = ${maxBatchSize}, max_batch_timeout = 0 }]
`;

const worker = `import { greeting } from "./lib.js";
export default {
  async fetch(request, env) {
    if (request.method === "POST") await env.JOBS.send("job", { delaySeconds: 1 });
    return new Response(greeting + (env.TOKEN === undefined ? "" : " " + env.TOKEN));
  },
  async queue(batch) {
    for (const m of batch.messages) console.log("consumed by " + greeting);
  },
};
`;

const listening = /listening on http:\/\/\S+/g;

/** A project whose lib.js says "v1", under `celld dev --port 0 --watch`, once it is watching. */
async function watchedProject(): Promise<{ p: Project; r: Run; url: string }> {
  const p = project();
  projects.push(p);
  p.write({ "wrangler.toml": config(10), "worker.js": worker, "lib.js": `export const greeting = "v1";\n` });
  const r = run(["dev", "--port", "0", "--watch"], p.dir);
  const [, url] = await waitFor(r, /listening on (http:\/\/\S+)/);
  await waitFor(r, /--watch: a change/);
  return { p, r, url: url! };
}

test("--watch restarts on a change to an imported file, on the same port and queues; a file that does not bundle or a config that does not load leaves the running Workers", async () => {
  const { p, r, url } = await watchedProject();
  expect(r.output()).toContain("[celld] --watch: a change to its config, dev vars (.dev.vars, .env) or 2 source files restarts the Workers\n");
  expect(await (await fetch(url)).text()).toBe("v1");

  p.write({ "lib.js": `export const greeting = "v2";\n` });
  await waitForCount(r, listening, 2);
  expect(r.output()).toContain("[celld] lib.js changed: restarting (in-flight batches get 10 s to finish)\n");
  expect(await (await fetch(url)).text()).toBe("v2");

  p.write({ "lib.js": `export const greeting = "v3" +;\n` });
  await waitFor(r, /the running Workers go on as they were/);
  expect(r.output()).toMatch(/celld: the Worker could not be bundled:\n {2}\S*lib\.js:1:31: Unexpected ";"\n/);
  expect(await (await fetch(url)).text()).toBe("v2");

  p.write({ "wrangler.toml": config(101) });
  await waitFor(r, /the deployment has 1 error\(s\); the running Workers go on as they were:\n.*max_batch_size/);
  expect(await (await fetch(url)).text()).toBe("v2");

  // Sent (delayed 1 s) before the restart below, consumed after it by the new code.
  expect(await (await fetch(url, { method: "POST" })).text()).toBe("v2");
  p.write({ "wrangler.toml": config(10), "lib.js": `export const greeting = "v4";\n` });
  await waitForCount(r, listening, 3);
  expect(await (await fetch(url)).text()).toBe("v4");
  await waitFor(r, /consumed by v4/);
  expect(r.output()).not.toContain("consumed by v2");

  r.kill("SIGINT");
  expect(await r.exited).toBe(0);
  expect(r.output()).toMatch(/SIGINT: stopping \(in-flight batches get 10 s to finish\)\.\.\.\n\[celld\] stopped\n$/);
}, 90_000);

test("--watch restarts when a .dev.vars appears, and without --watch nothing restarts", async () => {
  const { p, r: watching, url } = await watchedProject();
  p.write({ ".dev.vars": "TOKEN=secret\n" });
  await waitForCount(watching, listening, 2);
  expect(watching.output()).toContain("[celld] .dev.vars changed: restarting (in-flight batches get 10 s to finish)\n");
  expect(watching.output()).toContain(`Worker "app": loaded 1 variable from ${p.dir}/.dev.vars (TOKEN)`);
  expect(await (await fetch(url)).text()).toBe("v1 secret");
  watching.kill("SIGTERM");
  expect(await watching.exited).toBe(0);

  const plain = run(["dev", "--port", "0"], p.dir);
  const [, plainUrl] = await waitFor(plain, /listening on (http:\/\/\S+)/);
  p.write({ "lib.js": `export const greeting = "v2";\n` });
  // Time enough for a watch to have acted (150 ms to settle, a restart in about 2 s).
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  expect(await (await fetch(plainUrl!)).text()).toBe("v1 secret");
  expect(plain.output()).not.toContain("changed");
  plain.kill("SIGTERM");
  expect(await plain.exited).toBe(0);
}, 90_000);

test("a restart whose Worker throws at load leaves celld up with no Worker, and the next change starts it again", async () => {
  const { p, r, url } = await watchedProject();
  p.write({ "lib.js": `throw new Error("load boom");\nexport const greeting = "v2";\n` });
  await waitFor(r, /no Worker runs until a watched file changes again/);
  expect(r.output()).toMatch(/Uncaught Error: load boom[^]*celld: the Workers could not start/);
  await expect(fetch(url)).rejects.toThrow();
  p.write({ "lib.js": `export const greeting = "v3";\n` });
  await waitForCount(r, listening, 2);
  expect(await (await fetch(url)).text()).toBe("v3");
  r.kill("SIGTERM");
  expect(await r.exited).toBe(0);
}, 60_000);

test("--watch restarts when a file is added to the assets directory, which the asset router lists only at start", async () => {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "site"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nassets = { directory = "public" }\n`,
    "worker.js": `export default { fetch() { return new Response("from the Worker"); } };\n`,
    "public/index.html": "<p>home</p>",
  });
  const r = run(["dev", "--port", "0", "--watch"], p.dir);
  const [, url] = await waitFor(r, /listening on (http:\/\/\S+)/);
  await waitFor(r, /--watch: a change to its config, dev vars \(\.dev\.vars, \.env\), its assets directory or 1 source file restarts the Workers\n/);
  expect(await (await fetch(new URL("/about.html", url))).text()).toBe("from the Worker");
  p.write({ "public/about.html": "<p>about</p>" });
  await waitForCount(r, listening, 2);
  expect(r.output()).toContain("[celld] public changed: restarting");
  expect(await (await fetch(new URL("/about.html", url))).text()).toBe("<p>about</p>");
  r.kill("SIGTERM");
  expect(await r.exited).toBe(0);
}, 60_000);
