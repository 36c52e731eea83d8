import { request } from "node:http";
import { afterEach, expect, test } from "vitest";
import { project, runHost, type Project, type RunningHost } from "./host-harness.ts";

const projects: Project[] = [];
const hosts: RunningHost[] = [];
afterEach(async () => {
  for (const h of hosts.splice(0)) await h.close();
  projects.splice(0).forEach((p) => p.remove());
});

/** A GET with the Host header a browser would send for `host`; answers "<worker> <request.url>". */
function get(url: URL, host: string, path = "/"): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, headers: { host }, agent: false }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

const worker = (name: string) => `export default { fetch(req) { return new Response("${name} " + req.url); } };\n`;

test("every Worker of a deployment answers on the one port, by Host and by its routes; workers_dev = false hides the Host", async () => {
  const p = project();
  projects.push(p);
  const app = p.write({
    "app/wrangler.toml":
      'name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nservices = [{ binding = "PRIVATE", service = "private" }]\n',
    "app/worker.js": `export default {
  fetch(req, env) {
    if (new URL(req.url).pathname === "/through-binding") return env.PRIVATE.fetch(req);
    return new Response("app " + req.url);
  },
};
`,
  });
  // As on Cloudflare with workers_dev = false: no name host; its routes and bindings still reach it.
  const hidden = p.write({
    "private/wrangler.toml": 'name = "private"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nworkers_dev = false\nroute = "example.com/private/*"\n',
    "private/worker.js": worker("private"),
  });
  const api = p.write({
    "api/wrangler.jsonc": JSON.stringify({
      name: "api",
      main: "worker.js",
      compatibility_date: "2026-04-01",
      routes: ["example.com/api/*", { pattern: "*.example.com/v2*", zone_name: "example.com" }, { pattern: "api.example.org", custom_domain: true }],
    }),
    "api/worker.js": worker("api"),
  });
  const h = await runHost([app, api, hidden], p.dataDir);
  hosts.push(h);
  const url = h.host.url;
  const port = url.port;
  // By name, on any port: the Worker sees the Host the client sent.
  expect(await get(url, `api.localhost:${port}`, "/x?y=1")).toEqual({ status: 200, body: `api http://api.localhost:${port}/x?y=1` });
  expect(await get(url, "app.localhost", "/")).toEqual({ status: 200, body: "app http://app.localhost/" });
  // By route, most specific first, and by custom domain.
  expect((await get(url, "example.com", "/api/users")).body).toBe("api http://example.com/api/users");
  expect((await get(url, "www.example.com", "/v2/items")).body).toBe("api http://www.example.com/v2/items");
  expect((await get(url, "api.example.org", "/anything")).body).toBe("api http://api.example.org/anything");
  // Everything else: the first Worker.
  expect((await get(url, "example.com", "/other")).body).toBe("app http://example.com/other");
  expect((await get(url, `127.0.0.1:${port}`, "/")).body).toBe(`app http://127.0.0.1:${port}/`);
  expect((await get(url, "nobody.localhost", "/")).body).toBe("app http://nobody.localhost/");
  // workers_dev = false: its name host is not found (not the first Worker's either).
  expect(await get(url, `private.localhost:${port}`, "/")).toEqual({ status: 404, body: "celld: no Worker answers on this host\n" });
  expect((await get(url, "example.com", "/private/x")).body).toBe("private http://example.com/private/x");
  expect((await get(url, "app.localhost", "/through-binding")).body).toBe("private http://app.localhost/through-binding");
  expect(h.host.front.stats.requests).toEqual({ "worker-host": 3, route: 3, "custom-domain": 1, "first-worker": 3, "workers-dev-off": 1 });
});
