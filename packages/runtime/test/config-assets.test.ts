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
          assets: { directory: "./dist", binding: "ASSETS", html_handling: "auto", run_worker_first: ["/api/*"] },
        }),
        disk,
      ),
    );
    expect(error.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'assets.html_handling: must be "auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash" or "none", got "auto"',
      "assets.run_worker_first: route rules are not supported by celld, only true or false: the requests they give " +
        "the Worker would be answered with the file instead",
      'assets.directory: "./dist" is not a directory (looked for /srv/app/dist)',
      'assets.binding: binding name "ASSETS" is already used by kv_namespaces[0].binding',
    ]);
  });

  test("only the first Worker's are served, and a consumer Worker's are not: each left out is named, with why", () => {
    const deployment = parseDeployment(
      files(
        { name: "jobs", queues: { consumers: [{ queue: "q" }] }, assets: { directory: "public", binding: "FILES" } },
        { name: "web", assets: { directory: "public" } },
        { name: "docs", assets: { directory: "public", binding: "DOCS" } },
      ),
      disk,
    );
    expect(deployment.workers.map((w) => [w.name, w.assets?.directory])).toEqual([
      ["jobs", undefined],
      ["web", "/srv/web/public"],
      ["docs", undefined],
    ]);
    expect(formatWarnings(deployment.warnings)).toEqual([
      "/srv/jobs/wrangler.json: assets: are not served (and env.FILES is undefined): this Worker consumes queues, and " +
        "Miniflare sends every call into a Worker with assets through its asset router, which drops queue(): every batch would fail",
      "/srv/docs/wrangler.json: assets: are not served (and env.DOCS is undefined): Miniflare serves the assets of one " +
        'Worker per deployment, and Worker "web" (/srv/web/wrangler.json) has them',
    ]);
  });
});
