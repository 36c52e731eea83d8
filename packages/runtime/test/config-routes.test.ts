import { expect, test } from "vitest";
import { parseDeployment } from "../src/config/index.ts";
import { failure, issuesOf, parseOne } from "./config-failure.ts";

test("route and routes reach the Worker's config, each form as wrangler writes it", () => {
  expect(parseOne({}).workers[0]!.routes).toEqual([]);
  expect(parseOne({ route: "example.com/*" }).workers[0]!.routes).toEqual([{ pattern: "example.com/*", customDomain: false }]);
  expect(parseOne({ route: { pattern: "example.com/*", zone_name: "example.com" } }).workers[0]!.routes).toEqual([
    { pattern: "example.com/*", customDomain: false },
  ]);
  const routes = [
    "a.example.com/*",
    { pattern: "example.com/api/*", zone_id: "0123" },
    { pattern: "shop.example.com", custom_domain: true },
  ];
  expect(parseOne({ routes }).workers[0]!.routes).toEqual([
    { pattern: "a.example.com/*", customDomain: false },
    { pattern: "example.com/api/*", customDomain: false },
    { pattern: "shop.example.com", customDomain: true },
  ]);
  // No longer the "deploy-only, ignored" warning they had.
  expect(parseOne({ routes }).warnings).toEqual([]);
});

test("a pattern Cloudflare would refuse is refused at its own path, naming it", () => {
  expect(issuesOf({ routes: ["example.com/*", "example.com/*.jpg", { pattern: "example.com/?a=*" }] })).toEqual([
    'routes[1]: "example.com/*.jpg" has a * inside it; a route takes * only at the start of the host and the end of the path',
    'routes[2].pattern: "example.com/?a=*" has a query string, which a route cannot match on; end the path with * instead',
  ]);
  expect(issuesOf({ route: { pattern: "shop.example.com/*", custom_domain: true } })).toEqual([
    'route.pattern: "shop.example.com/*" is a custom domain, which must be a bare host name such as shop.example.com (no path, port or *)',
  ]);
  expect(issuesOf({ routes: [5] })).toEqual([
    'routes[0]: must be a route pattern such as "example.com/*", or a table with pattern and zone_name, got 5',
  ]);
  expect(issuesOf({ route: { zone_name: "example.com" } })).toEqual(["route.pattern: is required"]);
  expect(issuesOf({ route: { pattern: "a.com/*", custom_domain: "yes" } })).toEqual(['route.custom_domain: must be true or false, got "yes"']);
  expect(issuesOf({ route: "a.com/*", routes: ["b.com/*"] })).toEqual([
    "route: is set beside routes; give one of route or routes (wrangler refuses both)",
  ]);
});

test("a pattern claimed by two Workers of the deployment is refused, naming both", () => {
  const file = (name: string, routes: unknown[]) => ({
    path: `${name}.json`,
    text: JSON.stringify({ name, main: "index.js", compatibility_date: "2026-04-01", routes }),
  });
  const error = failure(() =>
    parseDeployment([file("a", ["example.com/*", { pattern: "shop.test", custom_domain: true }]), file("b", ["EXAMPLE.com/*", "shop.test/*"])], {
      fileExists: () => true,
    }),
  );
  expect(error.issues.map((i) => `${i.file}: ${i.path}: ${i.message}`)).toEqual([
    'b.json: routes[0]: route pattern "EXAMPLE.com/*" is also a.json (routes[0]) of Worker "a"; a route pattern takes one Worker',
  ]);
});
