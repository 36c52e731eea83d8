import { limits } from "@celld/queue-cell";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";
import { supportedCompatibilityDate } from "miniflare";
import {
  formatWarnings,
  loadDeployment,
  parseDeployment,
  type ConfigIssue,
  type ParseOptions,
} from "../src/config/index.ts";
import { failure } from "./config-failure.ts";

const fixtures = fileURLToPath(new URL("./fixtures/config/", import.meta.url));
const base = { main: "index.js", compatibility_date: "2024-03-18" };
const everyFileExists: ParseOptions = { fileExists: () => true };

/** One JSON config file per entry, named `<name>.json`. */
function files(...configs: ({ name: string } & Record<string, unknown>)[]) {
  return configs.map((c) => ({ path: `${c.name}.json`, text: JSON.stringify({ ...base, ...c }) }));
}

const issuesOf = (run: () => unknown): ConfigIssue[] => [...failure(run).issues];

describe("deployment-wide rules", () => {
  test("two scripts consuming one queue are refused, naming both files", () => {
    const paths = ["api.toml", "jobs.toml", "jobs-again.toml"].map((f) => join(fixtures, "multi", f));
    const error = failure(() => loadDeployment(paths));
    expect(error.issues).toEqual([
      {
        file: paths[2],
        path: "queues.consumers[0].queue",
        message: `queue "jobs" is already consumed by ${paths[1]} (queues.consumers[0]); only one script may consume a queue`,
      },
    ]);
    expect(error.message).toContain(paths[1]);
    expect(error.message.startsWith(`${paths[2]}: queues.consumers[0].queue: `)).toBe(true);
  });

  test("one script consuming one queue twice is refused too", () => {
    const issues = issuesOf(() =>
      parseDeployment(files({ name: "w", queues: { consumers: [{ queue: "q" }, { queue: "q" }] } }), everyFileExists),
    );
    expect(issues.map((i) => i.path)).toEqual(["queues.consumers[1].queue"]);
  });

  test("a queue cannot be its own dead-letter queue", () => {
    const consumers = [
      { queue: "q", dead_letter_queue: "dlq" },
      { queue: "jobs", dead_letter_queue: "jobs" },
    ];
    const config = { name: "w", queues: { consumers } };
    expect(issuesOf(() => parseDeployment(files(config), everyFileExists))).toEqual([
      {
        file: "w.json",
        path: "queues.consumers[1].dead_letter_queue",
        message: `"jobs" is the consumer's own queue; a queue cannot be its own dead-letter queue`,
      },
    ]);
  });

  test("dead-letter queues that form a loop are refused, across files", () => {
    const sources = files(
      { name: "a", queues: { consumers: [{ queue: "orders", dead_letter_queue: "orders-dlq" }] } },
      { name: "b", queues: { consumers: [{ queue: "orders-dlq", dead_letter_queue: "audit" }, { queue: "audit", dead_letter_queue: "orders" }] } },
    );
    expect(issuesOf(() => parseDeployment(sources, everyFileExists))).toEqual([
      {
        file: "b.json",
        path: "queues.consumers[1].dead_letter_queue",
        message:
          "dead-letter queues form a loop (audit -> orders -> orders-dlq -> audit); a message dead-lettered " +
          "around a loop would go round it for ever, each queue it reaches starting its four days of retention again",
      },
    ]);
    // A chain without a loop is fine.
    const chain = files({ name: "c", queues: { consumers: [{ queue: "x", dead_letter_queue: "y" }, { queue: "y", dead_letter_queue: "z" }] } });
    expect(parseDeployment(chain, everyFileExists).queues).toEqual(["x", "y", "z"]);
  });

  test("Worker names are unique across the deployment", () => {
    const sources = files({ name: "a" }, { name: "b" }, { name: "a" }).map((f, i) => ({ ...f, path: `${i}.json` }));
    expect(issuesOf(() => parseDeployment(sources, everyFileExists))).toEqual([
      { file: "2.json", path: "name", message: `"a" is also the name of the Worker in 0.json; each Worker needs its own name` },
    ]);
  });

  test("a Worker name in celld's own namespace is refused", () => {
    const sources = files({ name: "__celld_queue_dispatch" }).map((f) => ({ ...f, path: "w.json" }));
    expect(issuesOf(() => parseDeployment(sources, everyFileExists))).toEqual([
      {
        file: "w.json",
        path: "name",
        message: `"__celld_queue_dispatch" starts with "__celld_", which celld keeps for its own Workers; choose another name`,
      },
    ]);
  });

  test("main is looked up relative to the config file, and a missing one is refused", () => {
    const asked: string[] = [];
    const file = "/srv/app/wrangler.json";
    const text = JSON.stringify({ ...base, name: "w", main: "src/gone.ts" });
    const issues = issuesOf(() => parseDeployment([{ path: file, text }], { fileExists: (p) => (asked.push(p), false) }));
    expect(asked).toEqual(["/srv/app/src/gone.ts"]);
    expect(issues).toEqual([
      { file, path: "main", message: `"src/gone.ts" does not exist (looked for /srv/app/src/gone.ts)` },
    ]);
  });

  test("without a fileExists option, the real filesystem is asked", () => {
    const path = join(fixtures, "toml", "elsewhere.json");
    const issues = issuesOf(() => parseDeployment([{ path, text: JSON.stringify({ ...base, name: "w" }) }]));
    const wanted = resolve(fixtures, "toml", "index.js");
    expect(issues).toEqual([{ file: path, path: "main", message: `"index.js" does not exist (looked for ${wanted})` }]);
    const found = parseDeployment([{ path, text: JSON.stringify({ ...base, name: "w", main: "src/index.js" }) }]);
    expect(found.workers[0]?.main).toBe(join(fixtures, "toml", "src", "index.js"));
  });

  test("one binding name per Worker, across every kind of binding", () => {
    const config = {
      name: "w",
      vars: { JOBS: "x" },
      queues: { producers: [{ binding: "JOBS", queue: "q" }] },
      kv_namespaces: [{ binding: "JOBS", id: "k" }],
    };
    expect(issuesOf(() => parseDeployment(files(config), everyFileExists))).toEqual([
      { file: "w.json", path: "queues.producers[0].binding", message: `binding name "JOBS" is already used by vars.JOBS` },
      { file: "w.json", path: "kv_namespaces[0].binding", message: `binding name "JOBS" is already used by vars.JOBS` },
    ]);
  });

  test("a service binding or Durable Object script_name naming a Worker not in the deployment is a warning, and starts", () => {
    const config = {
      name: "w",
      services: [{ binding: "ME", service: "w" }, { binding: "AUTH", service: "auth" }],
      durable_objects: { bindings: [{ name: "C", class_name: "Counter", script_name: "counters" }] },
    };
    const deployment = parseDeployment(files(config), everyFileExists);
    expect(deployment.workers[0]?.services.map((s) => s.service)).toEqual(["w", "auth"]);
    expect(deployment.warnings.filter((w) => !w.path.startsWith("compatibility_date"))).toEqual([
      {
        file: "w.json",
        path: "services[1].service",
        message:
          `no Worker named "auth" in this deployment (its Workers: "w"); started without it: requests through ` +
          "env.AUTH are answered 503, naming it",
      },
      {
        file: "w.json",
        path: "durable_objects.bindings[0].script_name",
        message:
          `no Worker named "counters" in this deployment (its Workers: "w"); started without it: calls through ` +
          "env.C fail with an error naming it",
      },
    ]);
  });
});

describe("compatibility_date", () => {
  test.each([[undefined], ["<COMPATIBILITY_DATE>"]])("%s runs on the newest date this workerd supports, with a warning", (date) => {
    const deployment = parseDeployment(files({ name: "w", compatibility_date: date }), everyFileExists);
    expect(deployment.workers[0]?.compatibilityDate).toBe(supportedCompatibilityDate);
    const what = date === undefined ? "is not set" : 'is the template placeholder "<COMPATIBILITY_DATE>"';
    expect(deployment.warnings).toEqual([
      {
        file: "w.json",
        path: "compatibility_date",
        message:
          `${what}; running with "${supportedCompatibilityDate}", the newest date this workerd supports (as wrangler ` +
          `dev does); write compatibility_date = "${supportedCompatibilityDate}" to keep it when celld is upgraded`,
      },
    ]);
  });
});

describe("every error at once", () => {
  test("schema errors and deployment rules of several files come back together, one line each", () => {
    const error = failure(() =>
      parseDeployment(
        files(
          { name: "a", queues: { consumers: [{ queue: "q" }] } },
          {
            name: "b",
            main: 7,
            compatibility_date: "2024-13-01",
            queues: { consumers: [{ queue: "q", max_batch_size: limits.maxBatchSizeMax + 1, max_retries: -1 }] },
          },
        ),
        { fileExists: (p) => !p.endsWith("index.js") },
      ),
    );
    expect(error.issues.map((i) => `${i.file} ${i.path}`)).toEqual([
      "a.json main",
      "b.json main",
      "b.json compatibility_date",
      "b.json queues.consumers[0].max_batch_size",
      "b.json queues.consumers[0].max_retries",
      "b.json queues.consumers[0].queue",
    ]);
    expect(error.message.split("\n")).toHaveLength(error.issues.length);
    expect(error.issues[1]?.message).toBe("must be a string, got 7");
  });

  test("workers_dev takes a boolean", () => {
    const issues = issuesOf(() => parseDeployment(files({ name: "w", workers_dev: "no" }), everyFileExists));
    expect(issues).toEqual([{ file: "w.json", path: "workers_dev", message: 'must be a boolean, got "no"' }]);
  });

  test("required keys are named, and wrong types show the value", () => {
    const issues = issuesOf(() =>
      parseDeployment([
        { path: "w.json", text: JSON.stringify({ vars: { A: null }, queues: { producers: [{ queue: "q" }] } }) },
      ]),
    );
    expect(issues).toEqual([
      { file: "w.json", path: "name", message: "is required" },
      { file: "w.json", path: "main", message: "is required" },
      { file: "w.json", path: "vars.A", message: "must be a string, number, boolean or JSON object, got null" },
      { file: "w.json", path: "queues.producers[0].binding", message: "is required" },
    ]);
  });

  test.each([["2024-1-01"], ["2024-02-30"], ["yesterday"]])("compatibility_date %s is refused", (date) => {
    const [issue] = issuesOf(() => parseDeployment(files({ name: "w", compatibility_date: date }), everyFileExists));
    expect(issue).toEqual({
      file: "w.json",
      path: "compatibility_date",
      message: `must be a date written "YYYY-MM-DD", got "${date}"`,
    });
  });

  test("an unquoted TOML date is refused with what the user wrote", () => {
    const text = 'name = "w"\nmain = "index.js"\ncompatibility_date = 2024-03-18\n';
    const [issue] = issuesOf(() => parseDeployment([{ path: "w.toml", text }], everyFileExists));
    expect(issue?.message).toBe('must be a string "YYYY-MM-DD", got the unquoted date 2024-03-18');
  });
});

describe("pull consumers", () => {
  test("type http_pull with visibility_timeout_ms is accepted, in its bounds", () => {
    const config = { name: "w", queues: { consumers: [{ queue: "q", type: "http_pull", visibility_timeout_ms: 43_200_000 }] } };
    const deployment = parseDeployment(files(config), everyFileExists);
    expect(deployment.workers[0]!.consumers[0]).toMatchObject({ queue: "q", type: "http_pull", visibilityTimeoutMs: 43_200_000 });
  });

  test("a type other than worker or http_pull, and a visibility_timeout_ms past 12 h, are refused at their paths", () => {
    const config = { name: "w", queues: { consumers: [{ queue: "q", type: "push", visibility_timeout_ms: 43_200_001 }] } };
    const issues = issuesOf(() => parseDeployment(files(config), everyFileExists));
    expect(issues.map((i) => i.path)).toEqual(["queues.consumers[0].type", "queues.consumers[0].visibility_timeout_ms"]);
    expect(issues[0]!.message).toContain('"worker" or "http_pull"');
    expect(issues[1]!.message).toContain("43200000");
  });
});

describe("warnings", () => {
  test("unknown and ignored keys warn with file and path; the deployment still loads", () => {
    const config = {
      name: "w",
      $schema: "x",
      migrations: [{ tag: "v1" }],
      mian: "typo.js",
      env: { staging: {} },
      placement: { mode: "smart" },
      ai: { binding: "AI" },
      constructor: "not Object's",
      queues: {
        producers: [{ binding: "Q", queue: "q", remote: true }],
        consumers: [{ queue: "q", max_batch_sise: 5 }],
        pullers: [],
      },
    };
    const deployment = parseDeployment(files(config), everyFileExists);
    expect(deployment.warnings).toEqual([
      { file: "w.json", path: "mian", message: 'is not a key celld knows, so it has no effect (did you mean "main"?)' },
      { file: "w.json", path: "env", message: "named environments are read only with --env NAME (or CLOUDFLARE_ENV); running the top-level configuration" },
      { file: "w.json", path: "placement", message: "is a deploy setting with no effect on a local host; ignored" },
      { file: "w.json", path: "ai", message: "is a binding type celld does not provide; the Worker's env will not have it" },
      { file: "w.json", path: "constructor", message: "is not a key celld knows, so it has no effect" },
      { file: "w.json", path: "queues.producers[0].remote", message: "is ignored: celld runs every binding locally, on its data directory" },
      {
        file: "w.json",
        path: "queues.consumers[0].max_batch_sise",
        message: 'is not a key celld knows, so it has no effect (did you mean "max_batch_size"?)',
      },
      { file: "w.json", path: "queues.pullers", message: "is not a key celld knows, so it has no effect" },
    ]);
    expect(deployment.workers[0]?.consumers[0]?.maxBatchSize).toBe(limits.maxBatchSizeDefault);
  });

  test("a delivery_delay that takes effect warns that Cloudflare ignores it; 0 does not", () => {
    const producers = [
      { binding: "A", queue: "a", delivery_delay: 30 },
      { binding: "B", queue: "b", delivery_delay: 0 },
      { binding: "C", queue: "c" },
    ];
    const deployment = parseDeployment(files({ name: "w", queues: { producers } }), everyFileExists);
    expect(deployment.workers[0]?.producers.map((p) => p.deliveryDelaySeconds)).toEqual([30, 0, 0]);
    expect(formatWarnings(deployment.warnings)).toEqual([
      "w.json: queues.producers[0].delivery_delay: delays sends that name no delay by 30 s here; Cloudflare has deprecated it " +
        "and ignores it, so there they are not delayed (pass delaySeconds to send() to delay on both)",
    ]);
  });

  test("retries that outlast the queue's four-day retention warn: the message would be deleted before its last delivery", () => {
    const retention = limits.retentionSeconds;
    const consumers = [
      { queue: "a", max_retries: 4, retry_delay: retention / 4, dead_letter_queue: "a-dlq" },
      { queue: "b", max_retries: 100, retry_delay: 3_457 },
      // Just inside: the last delivery comes a second before the message would be deleted.
      { queue: "c", max_retries: 1, retry_delay: limits.delaySecondsMax, dead_letter_queue: "c-dlq" },
      { queue: "d", max_retries: 4, retry_delay: retention / 4 - 1 },
      { queue: "e" },
    ];
    const deployment = parseDeployment(files({ name: "w", queues: { consumers } }), everyFileExists);
    expect(formatWarnings(deployment.warnings)).toEqual([
      `w.json: queues.consumers[0].retry_delay: the last of 4 retries 86400 s apart comes at least 345600 s after a message ` +
        `entered queue "a", and a queue keeps a message for ${retention} s: one that keeps failing is deleted before that ` +
        `delivery, and never reaches the dead-letter queue "a-dlq" (keep max_retries × retry_delay under ${retention} s)`,
      `w.json: queues.consumers[1].retry_delay: the last of 100 retries 3457 s apart comes at least 345700 s after a message ` +
        `entered queue "b", and a queue keeps a message for ${retention} s: one that keeps failing is deleted before that ` +
        `delivery (keep max_retries × retry_delay under ${retention} s)`,
    ]);
  });

  test("a failed deployment still carries its warnings, since a typo often explains an error", () => {
    const error = failure(() => parseDeployment(files({ name: "w", mian: "x.js", main: undefined }), everyFileExists));
    expect(error.issues).toEqual([{ file: "w.json", path: "main", message: "is required" }]);
    expect(error.warnings).toEqual([
      { file: "w.json", path: "mian", message: 'is not a key celld knows, so it has no effect (did you mean "main"?)' },
    ]);
  });

  test("printed, a file's deploy-only keys share one line where the first stood; the rest keep theirs", () => {
    const generated = {
      account_id: "0123",
      workers_dev: true,
      observability: { enabled: true },
      kv_namespaces: [{ binding: "KV", id: "k", preview_id: "p", remote: true }],
      dev: { port: 9000 },
    };
    const deployment = parseDeployment(files({ name: "a", ...generated }, { name: "b", usage_model: "standard", colour: 1 }), everyFileExists);
    expect(deployment.warnings).toHaveLength(7);
    expect(formatWarnings(deployment.warnings)).toEqual([
      "a.json: account_id, observability, kv_namespaces[0].preview_id: are deploy settings with no effect on a local host; ignored",
      "a.json: kv_namespaces[0].remote: is ignored: celld runs every binding locally, on its data directory",
      "a.json: dev: is ignored: celld dev takes its address from --port and --host",
      "b.json: usage_model: is a deploy setting with no effect on a local host; ignored",
      "b.json: colour: is not a key celld knows, so it has no effect",
    ]);
  });
});
