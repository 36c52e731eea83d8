import { limits } from "@celld/queue-cell";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { formatIssue, parseDeployment, type ConfigSource, type ParseOptions } from "../src/config/index.ts";
import { failure } from "./config-failure.ts";

const base = { main: "index.js", compatibility_date: "2024-03-18" };

function file(path: string, config: Record<string, unknown>): ConfigSource {
  return { path, text: JSON.stringify({ ...base, ...config }) };
}

function parse(sources: ConfigSource[], environment: string | undefined, options: ParseOptions = {}) {
  return parseDeployment(sources, { fileExists: () => true, environment, ...options });
}

const lines = (run: () => unknown): string[] => failure(run).issues.map(formatIssue);

const app = {
  name: "app",
  compatibility_flags: ["nodejs_compat"],
  vars: { MODE: "top" },
  define: { DEBUG: "true" },
  queues: { producers: [{ binding: "JOBS", queue: "jobs" }], consumers: [{ queue: "jobs" }] },
  kv_namespaces: [{ binding: "KV", id: "top-kv" }],
  env: {
    production: {
      compatibility_date: "2025-01-01",
      vars: { MODE: "production" },
      queues: { producers: [{ binding: "JOBS", queue: "jobs-prod" }], consumers: [{ queue: "jobs-prod", max_batch_size: 50 }] },
    },
    staging: { name: "app-stage" },
  },
};

describe("--env NAME: the section over the top level, as wrangler 4 resolves it", () => {
  test("inheritable keys fall back to the top level; the section's own keys win", () => {
    const [worker] = parse([file("wrangler.json", app)], "production").workers;
    expect(worker?.main).toBe(join(process.cwd(), "index.js"));
    expect(worker?.compatibilityDate).toBe("2025-01-01");
    expect(worker?.compatibilityFlags).toEqual(["nodejs_compat"]);
    expect(worker?.vars).toEqual({ MODE: "production" });
    expect(worker?.producers.map((p) => p.queue)).toEqual(["jobs-prod"]);
    expect(worker?.consumers.map((c) => [c.queue, c.maxBatchSize])).toEqual([["jobs-prod", 50]]);
  });

  test("keys that are not inherited are absent when the section leaves them out, each named in a warning", () => {
    const deployment = parse([file("wrangler.json", app)], "production");
    const [worker] = deployment.workers;
    expect(worker?.kvNamespaces).toEqual([]);
    expect(worker?.define).toEqual({});
    expect(deployment.queues).toEqual(["jobs-prod"]);
    expect(deployment.warnings.map((w) => `${w.file}: ${w.path}`)).toEqual([
      "wrangler.json: env.production.define",
      "wrangler.json: env.production.kv_namespaces",
    ]);
    expect(deployment.warnings[1]?.message).toBe(
      'is not set, and "kv_namespaces" is not inherited by environments: the top level\'s kv_namespaces does not ' +
        'apply under --env production, so this Worker has none (add "kv_namespaces" to [env.production] if it should)',
    );
  });

  test("the Worker is named <name>-<env> unless the section names it; legacy_env = false keeps the name", () => {
    expect(parse([file("wrangler.json", app)], "production").workers[0]?.name).toBe("app-production");
    expect(parse([file("wrangler.json", app)], "staging").workers[0]?.name).toBe("app-stage");
    const service = { ...app, legacy_env: false };
    expect(parse([file("wrangler.json", service)], "production").workers[0]?.name).toBe("app");
  });

  test("without --env the top level runs, and the warning about env says how to choose one", () => {
    const deployment = parse([file("wrangler.json", app)], undefined);
    expect(deployment.workers[0]?.name).toBe("app");
    expect(deployment.workers[0]?.vars).toEqual({ MODE: "top" });
    expect(deployment.warnings).toContainEqual({
      file: "wrangler.json",
      path: "env",
      message: "named environments are read only with --env NAME (or CLOUDFLARE_ENV); running the top-level configuration",
    });
  });

  test("a top-level-only key inside a section is warned of and the top level's applies", () => {
    const config = { ...app, alias: { a: "./a.js" }, env: { production: { alias: { a: "./b.js" } } } };
    const deployment = parse([file("wrangler.json", config)], "production");
    expect(deployment.workers[0]?.alias).toEqual({ a: "./a.js" });
    expect(deployment.warnings).toContainEqual({
      file: "wrangler.json",
      path: "env.production.alias",
      message: "is read only from the top level (as wrangler does); ignored in an environment",
    });
  });
});

describe("--env NAME: problems inside a section are named by their path in it", () => {
  test("a bound out of range, and a deployment rule broken inside the section", () => {
    const production = {
      queues: { consumers: [{ queue: "q", max_batch_size: limits.maxBatchSizeMax + 1 }, { queue: "q" }] },
    };
    expect(lines(() => parse([file("wrangler.json", { name: "w", env: { production } })], "production"))).toEqual([
      `wrangler.json: env.production.queues.consumers[0].max_batch_size: must be from ${limits.maxBatchSizeMin} to ${limits.maxBatchSizeMax}, got ${limits.maxBatchSizeMax + 1}`,
      "wrangler.json: env.production.queues.consumers[1].queue: queue \"q\" is already consumed by wrangler.json (env.production.queues.consumers[0]); only one script may consume a queue",
    ]);
  });

  test("an unknown key in the section is warned of with its path and the key it was probably meant to be", () => {
    const deployment = parse([file("wrangler.json", { name: "w", env: { production: { queus: {} } } })], "production");
    expect(deployment.warnings).toContainEqual({
      file: "wrangler.json",
      path: "env.production.queus",
      message: 'is not a key celld knows, so it has no effect (did you mean "queues"?)',
    });
  });

  test("an inherited key's problem keeps its top-level path", () => {
    expect(lines(() => parse([file("wrangler.json", { name: "w", compatibility_date: "2024-13-01", env: { production: {} } })], "production"))).toEqual([
      'wrangler.json: compatibility_date: must be a date written "YYYY-MM-DD", got "2024-13-01"',
    ]);
  });
});

describe("--env NAME: refusals", () => {
  test("a file that defines other environments but not this one is refused, naming those it defines", () => {
    expect(lines(() => parse([file("wrangler.json", app)], "prod"))).toEqual([
      'wrangler.json: --env prod: this file defines no environment of that name; it defines "production", "staging" (add [env.prod] to run it)',
    ]);
  });

  test("when no config of the deployment defines environments, --env is refused for each", () => {
    expect(lines(() => parse([file("a.json", { name: "a" }), file("b.json", { name: "b" })], "production"))).toEqual([
      "a.json: --env production: this file defines no named environments ([env.production]), and neither does any other config of the deployment; drop --env (and CLOUDFLARE_ENV) to run the top level",
      "b.json: --env production: this file defines no named environments ([env.production]), and neither does any other config of the deployment; drop --env (and CLOUDFLARE_ENV) to run the top level",
    ]);
  });

  test("a section that is not a table, or an env that is not one, is refused", () => {
    expect(lines(() => parse([file("wrangler.json", { name: "w", env: { production: 3 } })], "production"))).toEqual([
      "wrangler.json: env.production: must be an object (TOML table) of the environment's keys",
    ]);
    expect(lines(() => parse([file("wrangler.json", { name: "w", env: "production" })], "production"))).toEqual([
      "wrangler.json: env: must be a table of named environments, so --env production cannot be read from it",
    ]);
  });

  test("with several configs, one without environments runs its top level as <name>-<env>, with a warning, as in wrangler", () => {
    const deployment = parse([file("app.json", app), file("aux.json", { name: "aux" })], "production");
    expect(deployment.workers.map((w) => w.name)).toEqual(["app-production", "aux-production"]);
    expect(deployment.warnings).toContainEqual({
      file: "aux.json",
      path: "",
      message: '--env production: this file defines no environments, so its top-level configuration runs, as the Worker "aux-production" (wrangler names it so)',
    });
  });
});

describe("--env NAME: .dev.vars.NAME and .env.NAME, as wrangler dev reads them", () => {
  function memoryFiles(files: Record<string, string>): Pick<ParseOptions, "readDevVarsFile"> {
    return { readDevVarsFile: (path) => (Object.hasOwn(files, path) ? files[path] : undefined) };
  }
  const config = file(join("app", "wrangler.json"), { name: "app", env: { production: {} } });

  test(".dev.vars.NAME is read instead of .dev.vars when it exists", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "A=plain\nB=plain\n", [join("app", ".dev.vars.production")]: "A=prod\n" });
    expect(parse([config], "production", files).workers[0]?.vars).toEqual({ A: "prod" });
    expect(parse([config], undefined, files).workers[0]?.vars).toEqual({ A: "plain", B: "plain" });
    const plainOnly = memoryFiles({ [join("app", ".dev.vars")]: "A=plain\n" });
    expect(parse([config], "production", plainOnly).workers[0]?.vars).toEqual({ A: "plain" });
  });

  test("without .dev.vars files, .env, .env.local, .env.NAME and .env.NAME.local merge, the later winning", () => {
    const files = memoryFiles({
      [join("app", ".env")]: "A=env\nB=env\nC=env\nD=env\n",
      [join("app", ".env.local")]: "B=local\n",
      [join("app", ".env.production")]: "C=production\nE=${A}-expanded\n",
      [join("app", ".env.production.local")]: "D=production-local\n",
      [join("app", ".env.staging")]: "A=staging\n",
    });
    expect(parse([config], "production", files).workers[0]?.vars).toEqual({
      A: "env",
      B: "local",
      C: "production",
      D: "production-local",
      E: "env-expanded",
    });
  });

  test("a malformed .dev.vars.NAME is named as the file it is", () => {
    const files = memoryFiles({ [join("app", ".dev.vars.production")]: "NOT AN ASSIGNMENT\n" });
    expect(lines(() => parse([config], "production", files))).toEqual([
      `${join("app", ".dev.vars.production")}: line 1: expected NAME=value, but the line has no "="`,
    ]);
  });
});
