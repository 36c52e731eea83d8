import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { describe, expect, test } from "vitest";
import { isConfigError, loadDeployment, parseDeployment, type ConfigIssue } from "../src/config/index.ts";

const fixtures = fileURLToPath(new URL("./fixtures/config/", import.meta.url));
const at = (...parts: string[]) => join(fixtures, ...parts);

function issuesOf(run: () => unknown): ConfigIssue[] {
  try {
    run();
  } catch (error) {
    if (isConfigError(error)) return [...error.issues];
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("reading wrangler.toml, wrangler.json and wrangler.jsonc", () => {
  test("a TOML file with every key celld reads becomes the typed model", () => {
    const path = at("toml", "wrangler.toml");
    const deployment = loadDeployment([path]);
    expect(deployment.workers).toEqual([
      {
        configPath: path,
        name: "producer",
        main: at("toml", "src", "index.js"),
        compatibilityDate: "2024-09-23",
        compatibilityFlags: ["nodejs_compat"],
        vars: { GREETING: "hello", LIMIT: 3, ENABLED: true, NESTED: { a: 1 } },
        producers: [
          { binding: "JOBS", queue: "jobs", deliveryDelaySeconds: 0 },
          { binding: "LATER", queue: "later", deliveryDelaySeconds: 30 },
        ],
        consumers: [
          {
            queue: "jobs",
            type: "worker",
            maxBatchSize: 50,
            maxBatchTimeoutSeconds: 2,
            maxRetries: 5,
            retryDelaySeconds: 10,
            deadLetterQueue: "jobs-dlq",
            maxConcurrency: 4,
          },
        ],
        kvNamespaces: [{ binding: "CACHE", id: "kv-1" }],
        d1Databases: [
          { binding: "DB", databaseName: "app", databaseId: "d1-1", migrationsDir: join(dirname(path), "migrations"), migrationsTable: "d1_migrations" },
        ],
        r2Buckets: [{ binding: "FILES", bucketName: "files" }],
        durableObjects: [{ name: "COUNTER", className: "Counter" }],
        durableObjectClasses: [{ className: "Counter", storage: "kv" }],
        services: [{ binding: "SELF", service: "producer", entrypoint: "Api" }],
        crons: ["*/5 * * * *", "0 18 * * FRIL"],
        routes: [],
        workersDev: true,
        define: { "process.env.MODE": '"production"' },
        alias: { "node-fetch": "./src/fetch-shim.js" },
        moduleRules: [{ type: "Text", globs: ["**/*.md"], fallthrough: true }],
      },
    ]);
    expect(deployment.queues).toEqual(["jobs", "jobs-dlq", "later"]);
    // migrations are read without a word; the deploy-only keys are named as ignored, and the
    // delivery_delay that Cloudflare would ignore as honoured.
    expect(deployment.warnings).toEqual([
      { file: path, path: "account_id", message: "is a deploy setting with no effect on a local host; ignored" },
      { file: path, path: "kv_namespaces[0].preview_id", message: "is a deploy setting with no effect on a local host; ignored" },
      {
        file: path,
        path: "queues.producers[1].delivery_delay",
        message:
          "delays sends that name no delay by 30 s here; Cloudflare has deprecated it and ignores it, " +
          "so there they are not delayed (pass delaySeconds to send() to delay on both)",
      },
    ]);
  });

  test("a JSON file, with $schema accepted silently", () => {
    const deployment = loadDeployment([at("json", "wrangler.json")]);
    expect(deployment.workers.map((w) => [w.name, w.main])).toEqual([["json-worker", at("json", "src", "index.js")]]);
    expect(deployment.queues).toEqual(["jobs"]);
    expect(deployment.warnings).toEqual([]);
  });

  test("a JSONC file with comments and trailing commas", () => {
    const deployment = loadDeployment([at("jsonc", "wrangler.jsonc")]);
    expect(deployment.workers[0]).toMatchObject({ name: "jsonc-worker", consumers: [{ queue: "jobs", maxBatchSize: 100 }] });
  });

  test("several files make one deployment, in the order given", () => {
    const files = [at("multi", "api.toml"), at("multi", "jobs.toml")];
    const deployment = loadDeployment(files);
    expect(deployment.workers.map((w) => [w.name, w.configPath, w.main])).toEqual([
      ["api", files[0], at("multi", "api.js")],
      ["jobs", files[1], at("multi", "jobs.js")],
    ]);
    expect(deployment.queues).toEqual(["jobs", "jobs-dlq"]);
  });
});

describe("files that cannot be read", () => {
  test("bad TOML syntax names the file and the line", () => {
    const path = at("bad-toml", "wrangler.toml");
    const [issue, ...rest] = issuesOf(() => loadDeployment([path]));
    expect(rest).toEqual([]);
    expect(issue).toMatchObject({ file: path, path: "" });
    expect(issue?.message).toBe(
      "TOML syntax error at line 6, column 16: each key-value declaration must be followed by an end-of-line",
    );
  });

  test.each([
    ["an array missing its ]", 'name = "w"\ncompatibility_flags = ["nodejs_compat"\nmain = "w.js"\n', "line 2, column 23: the array opened here is not closed with ]"],
    ["a multi-line array missing its ]", 'name = "w"\nroutes = [\n  "a.example.com/*",\n\nmain = "w.js"\n', "line 2, column 10: the array opened here is not closed with ]"],
    ["an array of tables' header missing a ]", '[[queues.consumers]\nqueue = "a"\n', "line 1, column 1: the table header is not closed with ]]"],
    ["brackets inside strings and comments", 'name = "a [ b"\nflags = ["x" # [\n]\nmain = \n', "line 4, column 8: incomplete key-value declaration: no value specified"],
  ])("a TOML syntax error names the line of the mistake: %s", (_what, text, where) => {
    const [issue] = issuesOf(() => parseDeployment([{ path: "w.toml", text }]));
    expect(issue).toEqual({ file: "w.toml", path: "", message: `TOML syntax error at ${where}` });
  });

  test("bad JSON syntax names the file and the line", () => {
    const path = at("bad-json", "wrangler.json");
    const issues = issuesOf(() => loadDeployment([path]));
    expect(issues[0]).toEqual({ file: path, path: "", message: "JSON syntax error at line 4, column 3: a comma was expected before this" });
  });

  test("a syntax error in one file does not hide the other files' errors", () => {
    const issues = issuesOf(() =>
      parseDeployment(
        [
          { path: "a.toml", text: "name = " },
          { path: "b.json", text: JSON.stringify({ name: "b", main: "b.js", compatibility_date: "soon" }) },
        ],
        { fileExists: () => true },
      ),
    );
    expect(issues.map((i) => [i.file, i.path])).toEqual([
      ["a.toml", ""],
      ["b.json", "compatibility_date"],
    ]);
  });

  test("a missing config file, and a file celld does not read, are both reported", () => {
    const missing = at("nowhere", "wrangler.toml");
    const broken = at("bad-json", "wrangler.json");
    expect(issuesOf(() => loadDeployment([missing, broken])).map((i) => [i.file, i.message])).toEqual([
      [missing, `config file not found (looked for ${missing})`],
      [broken, "JSON syntax error at line 4, column 3: a comma was expected before this"],
    ]);
    // A relative -c is named as typed, and the message says where it was looked for, as the keys
    // command and a missing `main` say: a path typed in another directory than meant reads right.
    expect(issuesOf(() => loadDeployment([join("nowhere", "wrangler.toml")])).map((i) => [i.file, i.message])).toEqual([
      [join("nowhere", "wrangler.toml"), `config file not found (looked for ${join(process.cwd(), "nowhere", "wrangler.toml")})`],
    ]);
    const [issue] = issuesOf(() => parseDeployment([{ path: "wrangler.yaml", text: "name: x" }]));
    expect(issue?.message).toContain("its name must end in .toml, .json or .jsonc");
  });

  test("a file that is not a table, and a deployment of no files, are refused", () => {
    expect(issuesOf(() => parseDeployment([{ path: "w.json", text: "[1]" }]))).toEqual([
      { file: "w.json", path: "", message: "must be an object (TOML table), got an array" },
    ]);
    expect(issuesOf(() => parseDeployment([]))[0]?.message).toBe("a deployment needs at least one config file");
  });
});
