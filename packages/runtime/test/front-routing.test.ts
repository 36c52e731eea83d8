import { describe, expect, it } from "vitest";
import { parseRoutePattern, routeMatches } from "../src/config/route-pattern.ts";
import { WorkerRouter, hostnameOf, type RoutedWorker } from "../src/front/worker-router.ts";

const route = (pattern: string) => ({ pattern, customDomain: false });

function router(workers: RoutedWorker[], workersDevDomain?: string): WorkerRouter {
  return new WorkerRouter({ workers, workersDevDomain });
}

describe("route patterns", () => {
  it.each([
    ["example.com/*", "example.com", "/", true],
    ["example.com/*", "example.com", "/a/b?c=d", true],
    ["example.com/*", "www.example.com", "/", false],
    ["*example.com/*", "example.com", "/", true],
    ["*example.com/*", "www.example.com", "/x", true],
    ["*.example.com/*", "example.com", "/", false],
    ["*.example.com/*", "a.b.example.com", "/", true],
    ["example.com/api", "example.com", "/api", true],
    ["example.com/api", "example.com", "/api?x=1", false],
    ["example.com/api", "example.com", "/api/", false],
    ["example.com", "example.com", "/", true],
    ["example.com", "example.com", "/a", false],
    ["https://example.com/*", "example.com", "/a", true],
    ["*/*", "anything.test", "/a", true],
    ["EXAMPLE.com/*", "example.com", "/", true],
  ])("%s on %s%s: %s", (pattern, host, path, expected) => {
    expect(routeMatches(parseRoutePattern(pattern), host, path)).toBe(expected);
  });

  it.each([
    ["example.com/*.jpg", "has a * inside it"],
    ["ex*ample.com/*", "has a * inside it"],
    ["example.com/?foo=*", "has a query string"],
    ["/*", "has no host"],
    ["example.com:8080/*", "names a port"],
  ])("refuses %s", (pattern, reason) => {
    expect(() => parseRoutePattern(pattern)).toThrow(`route pattern ${JSON.stringify(pattern)} ${reason}`);
  });
});

describe("WorkerRouter", () => {
  const workers: RoutedWorker[] = [
    { name: "app", routes: [] },
    { name: "images", routes: [route("example.com/images/*")] },
    { name: "images-loose", routes: [route("example.com/images*")] },
    { name: "wild", routes: [route("*.example.com/a")] },
    { name: "a-host", routes: [route("a.example.com/*")] },
    { name: "shop", routes: [{ pattern: "shop.example.com", customDomain: true }] },
    { name: "shop-logger", routes: [route("shop.example.com/log/*")] },
  ];
  const r = router(workers, "workers.test");

  it.each([
    // Host by name, any port, any case, trailing dot.
    ["images.localhost:8787", "/", "images", "worker-host"],
    ["SHOP.localhost", "/", "shop", "worker-host"],
    ["wild.localhost.", "/", "wild", "worker-host"],
    ["app.workers.test", "/", "app", "worker-host"],
    // Cloudflare's documented specificity surprises (known issues page), as workers-sdk reproduces.
    ["example.com", "/images/hello", "images-loose", "route"],
    ["example.com", "/images123", "images-loose", "route"],
    ["a.example.com", "/a", "a-host", "route"],
    ["b.example.com", "/a", "wild", "route"],
    // A route on a custom domain's host goes first; the rest of the host is the custom domain's.
    ["shop.example.com", "/log/1", "shop-logger", "route"],
    ["shop.example.com", "/cart", "shop", "custom-domain"],
    // Everything else: the first Worker.
    ["localhost:8787", "/", "app", "first-worker"],
    ["127.0.0.1:8787", "/images/x", "app", "first-worker"],
    ["nobody.localhost", "/", "app", "first-worker"],
    [undefined, "/", "app", "first-worker"],
    ["images.other.test", "/", "app", "first-worker"],
  ])("%s%s -> %s (%s)", (host, path, worker, reason) => {
    expect(r.route(host, path)).toEqual({ worker, reason });
  });

  it("a Worker with workers_dev = false has no name host, whatever the domain; its routes still reach it", () => {
    const hiding = router([{ name: "app", routes: [] }, { name: "private", routes: [route("example.com/p/*")], workersDev: false }], "workers.test");
    expect(hiding.route("private.localhost:8787", "/")).toEqual({ worker: "private", reason: "workers-dev-off" });
    expect(hiding.route("private.workers.test", "/")).toEqual({ worker: "private", reason: "workers-dev-off" });
    expect(hiding.route("example.com", "/p/1")).toEqual({ worker: "private", reason: "route" });
    expect(hiding.workerHosts("private")).toEqual([]);
    expect(hiding.workerHosts("app")).toEqual(["app.localhost", "app.workers.test"]);
    // A route written for the name host claims it.
    const claimed = router([{ name: "app", routes: [route("private.localhost/*")] }, { name: "private", routes: [], workersDev: false }]);
    expect(claimed.route("private.localhost", "/")).toEqual({ worker: "app", reason: "route" });
  });

  it("matches the normalised path of an absolute or dotted target", () => {
    expect(r.route("example.com", "/x/../images/a").worker).toBe("images-loose");
    expect(r.route("example.com", "http://example.com/images/a").worker).toBe("images-loose");
  });

  it("breaks an exact tie by the longer pattern, then by deployment order", () => {
    const tie = router([
      { name: "first", routes: [] },
      { name: "one", routes: [route("example.com/a*")] },
      { name: "two", routes: [route("example.com/a*")] },
    ]);
    expect(tie.route("example.com", "/abc").worker).toBe("one");
  });

  it("names each Worker's hosts", () => {
    expect(r.workerHosts("Shop")).toEqual(["shop.localhost", "shop.workers.test"]);
    expect(router([{ name: "x", routes: [] }]).workerHosts("x")).toEqual(["x.localhost"]);
  });

  it("refuses a custom domain with a path or a wildcard, naming it", () => {
    expect(() => router([{ name: "a", routes: [{ pattern: "shop.example.com/*", customDomain: true }] }])).toThrow(
      'route pattern "shop.example.com/*" is a custom domain, which must be a bare host name',
    );
  });

  it("reads host headers", () => {
    expect(hostnameOf("[::1]:8787")).toBe("[::1]");
    expect(hostnameOf("Example.COM:80")).toBe("example.com");
    expect(hostnameOf(undefined)).toBe("");
  });
});

describe("workerUrlLines", () => {
  it("says where each Worker answers, the first Worker's line in the form scripts read", async () => {
    const { workerUrlLines } = await import("../src/front/worker-urls.ts");
    const workers: RoutedWorker[] = [
      { name: "app", routes: [] },
      { name: "api", routes: [route("example.com/api/*"), { pattern: "api.example.com", customDomain: true }] },
    ];
    const r = router(workers, "dev.test");
    expect(workerUrlLines(r, workers, new URL("http://127.0.0.1:8787/"))).toEqual([
      'Worker "app" listening on http://127.0.0.1:8787/ (also http://app.localhost:8787/; http://app.dev.test:8787/, and every request no other Worker\'s host or route claims)',
      'Worker "api" reachable at http://api.localhost:8787/; http://api.dev.test:8787/; routes example.com/api/*, api.example.com (custom domain)',
    ]);
    const one = [{ name: "solo", routes: [] }];
    expect(workerUrlLines(router(one), one, new URL("http://192.168.1.5:80/"))).toEqual(['Worker "solo" listening on http://192.168.1.5/']);
  });
});
