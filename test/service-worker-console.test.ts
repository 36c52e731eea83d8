import { expect, test } from "vitest";
import { eventually, tidyAfterEach } from "./host-harness.ts";

// workerd passes on a service-worker script's console output only as verbose informational lines;
// celld runs it verbose when a deployment has such a script, and shows them as the Worker's output.

const { project, runHost } = tidyAfterEach();

test("a service-worker script's console output, top level and listener, is in the host's log; workerd's other verbose lines are not", async () => {
  const p = project();
  const sw = p.write({
    "sw/wrangler.toml": `
name = "sw"
main = "worker.js"
compatibility_date = "2026-04-01"
`,
    "sw/worker.js": `console.log("loaded");
addEventListener("fetch", (event) => {
  const { pathname } = new URL(event.request.url);
  console.log("request for", pathname, { n: 1 });
  console.error("an error line");
  // A refused connection: workerd says so among its informational lines, with a native stack.
  if (pathname === "/refused") return event.respondWith(fetch("http://127.0.0.1:1/").catch(() => new Response("refused")));
  event.respondWith(new Response("ok"));
});
`,
  });
  // A module Worker beside it prints as before, once.
  const mod = p.write({
    "mod/wrangler.toml": `
name = "mod"
main = "worker.js"
compatibility_date = "2026-04-01"
`,
    "mod/worker.js": `export default { fetch() { console.log("module line"); return new Response("m"); } };`,
  });
  const h = await runHost([sw, mod], p.dataDir);
  expect(await (await h.fetch("/a")).text()).toBe("ok");
  expect(await (await h.fetch("/refused")).text()).toBe("refused");
  await eventually(() => (h.log.lines.filter((l) => l.startsWith("stdout: request for")).length === 2 ? true : undefined), "both requests' lines");
  expect(h.log.lines).toContain("stdout: loaded");
  expect(h.log.lines).toContain('stdout: request for /a {"n":1}');
  expect(h.log.lines.filter((l) => l === "stdout: an error line")).toHaveLength(2);
  expect(h.log.lines.filter((l) => /workerd\/|info:|Connection refused|^stderr: +at /.test(l))).toEqual([]);
  const modWorker = await h.host.miniflare.getWorker("mod");
  expect(await (await modWorker.fetch("http://x/")).text()).toBe("m");
  await eventually(() => h.log.lines.find((l) => l === "stdout: module line"), "the module Worker's line");
  expect(h.log.lines.filter((l) => l.includes("module line"))).toEqual(["stdout: module line"]);
});
