import { describe, expect, test } from "vitest";
import { formatWarnings, parseDeployment, type ParseOptions } from "../src/config/index.ts";
import { failure } from "./config-failure.ts";

const disk: ParseOptions = { fileExists: () => true, directoryExists: (path) => path.endsWith("/public") };

function files(...configs: ({ name: string } & Record<string, unknown>)[]) {
  return configs.map((c) => ({
    path: `/srv/${c.name}/wrangler.json`,
    text: JSON.stringify({ main: "index.js", compatibility_date: "2026-04-01", ...c }),
  }));
}

describe("[assets]", () => {
  test("are read with the directory resolved against the config file; run_worker_first defaults to false", () => {
    const deployment = parseDeployment(
      files({ name: "app", assets: { directory: "./public", binding: "ASSETS", not_found_handling: "single-page-application" } }),
      disk,
    );
    expect(deployment.workers[0]?.assets).toEqual({
      directory: "/srv/app/public",
      binding: "ASSETS",
      htmlHandling: undefined,
      notFoundHandling: "single-page-application",
      runWorkerFirst: false,
    });
    expect(deployment.warnings).toEqual([]);
  });

  test("a directory that is not there, a binding name already taken and values Miniflare does not know are refused", () => {
    const error = failure(() =>
      parseDeployment(
        files({
          name: "app",
          kv_namespaces: [{ binding: "ASSETS", id: "kv" }],
          assets: { directory: "./dist", binding: "ASSETS", html_handling: "auto", run_worker_first: "yes" },
        }),
        disk,
      ),
    );
    expect(error.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'assets.html_handling: must be "auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash" or "none", got "auto"',
      'assets.run_worker_first: must be true, false or an array of route rules ("/api/*", "!/api/docs/*"), got "yes"',
      'assets.directory: "./dist" is not a directory (looked for /srv/app/dist)',
      'assets.binding: binding name "ASSETS" is already used by kv_namespaces[0].binding',
    ]);
  });

  test("run_worker_first route rules split into the Worker's and the files'", () => {
    const deployment = parseDeployment(
      files({ name: "app", assets: { directory: "public", run_worker_first: ["/api/*", "!/api/docs/*", "/login"] } }),
      disk,
    );
    expect(deployment.workers[0]?.assets?.runWorkerFirst).toEqual({ worker: ["/api/*", "/login"], assets: ["/api/docs/*"] });
  });

  const rulesOf = (count: number, chars = 6) =>
    Array.from({ length: count }, (_, i) => `/${String(i).padStart(chars - 1, "0")}`);
  test.each([
    ["at the bound of rules", rulesOf(100), []],
    ["past the bound of rules", rulesOf(101), ["assets.run_worker_first: must hold at most 100 rules, got 101"]],
    ["a rule at the bound of characters", rulesOf(1, 100), []],
    ["a rule past it", rulesOf(1, 101), ["assets.run_worker_first[0]: must be at most 100 characters, got 101"]],
    ["no rule", [], ['assets.run_worker_first: must hold at least one rule, such as "/api/*"']],
    [
      "rules of the wrong shape",
      ["api/*", "/a", "/a", "!docs", 7],
      [
        "assets.run_worker_first[4]: must be a route rule string, got 7",
      ],
    ],
    [
      "rules of the wrong shape (strings)",
      ["api/*", "/a", "/a", "!docs"],
      [
        'assets.run_worker_first[0]: must start with "/" (to the Worker first) or "!/" (to the files first), got "api/*"',
        'assets.run_worker_first[2]: "/a" is a duplicate',
        'assets.run_worker_first[3]: must start with "/" (to the Worker first) or "!/" (to the files first), got "!docs"',
      ],
    ],
    [
      "a rule a wider one covers, and only negative rules",
      ["!/api/*", "!/api/docs"],
      [
        'assets.run_worker_first[1]: "!/api/docs" is redundant: "!/api/*" matches all it matches',
        'assets.run_worker_first: must hold a rule that is not negative (such as "/api/*"): only negative rules send nothing to the Worker',
      ],
    ],
  ])("run_worker_first: %s", (_, rules, expected) => {
    const parse = () => parseDeployment(files({ name: "app", assets: { directory: "public", run_worker_first: rules } }), disk);
    if (expected.length === 0) expect(parse().workers[0]?.assets?.runWorkerFirst).toBeTypeOf("object");
    else expect(failure(parse).issues.map((i) => `${i.path}: ${i.message}`)).toEqual(expected);
  });

  test("every Worker's are served, a consumer's too, with no warning", () => {
    const deployment = parseDeployment(
      files(
        { name: "jobs", queues: { consumers: [{ queue: "q" }] }, assets: { directory: "public", binding: "FILES" } },
        { name: "web", assets: { directory: "public" } },
      ),
      disk,
    );
    expect(deployment.workers.map((w) => [w.name, w.assets?.directory])).toEqual([
      ["jobs", "/srv/jobs/public"],
      ["web", "/srv/web/public"],
    ]);
    expect(formatWarnings(deployment.warnings)).toEqual([]);
  });
});
