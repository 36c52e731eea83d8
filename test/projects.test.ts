import { cpSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { formatWarnings, loadDeployment } from "../packages/runtime/src/config/index.ts";
import { defaultCompatibilityDate } from "../packages/runtime/src/config/compatibility-date.ts";
import { run, waitFor } from "./cli-harness.ts";
import { eventually, tidyAfterEach } from "./host-harness.ts";

/**
 * The corpus of test/fixtures/projects: projects written in the shapes of public Cloudflare ones
 * (create-cloudflare templates, workers-sdk fixtures), each started as it is, with real workerd.
 * Nothing in a fixture is edited to suit celld; each test copies it to its own directory first.
 */

const { project, runHost } = tidyAfterEach();
const fixtures = join(import.meta.dirname, "fixtures", "projects");

/** A copy of the fixture `name` in a project directory of its own (so the data dir is beside it). */
function copyOf(name: string) {
  const p = project();
  cpSync(join(fixtures, name), p.dir, { recursive: true });
  return p;
}

test("create-cloudflare's queues template, with its <COMPATIBILITY_DATE> placeholder, starts and consumes", async () => {
  const p = copyOf("c3-queues");
  const config = join(p.dir, "wrangler.jsonc");
  const lines = formatWarnings(loadDeployment([config]).warnings);
  expect(lines).toContain(
    `${config}: compatibility_date: is the template placeholder "<COMPATIBILITY_DATE>"; running with ` +
      `"${defaultCompatibilityDate}", the newest date this workerd supports (as wrangler dev does); write ` +
      `compatibility_date = "${defaultCompatibilityDate}" to keep it when celld is upgraded`,
  );
  const h = await runHost([config], p.dataDir);
  const response = await h.fetch("/hello");
  expect(await response.text()).toBe("Sent message to the queue");
  h.clock.advance(5_000);
  const [batch] = await eventually(() => (h.batches.length > 0 ? h.batches : undefined), "the consumer's batch");
  expect(batch).toMatchObject({ queue: "my-queue", size: 1, acked: 1, outcome: "ok" });
  // workerd's stdout reaches the log on its own schedule.
  const logged = await eventually(() => h.log.lines.find((l) => l.includes("processed:")), "the consumer's console.log line");
  expect(logged).toMatch(/message [0-9A-Z]+ processed: {"url":"http:\/\/[^"]+\/hello","method":"GET"/);
});

test("bindings to Workers not in the deployment: warned at start, the rest runs, each call fails at once naming the Worker", async () => {
  const p = copyOf("absent-bindings");
  const config = join(p.dir, "wrangler.toml");
  const lines = formatWarnings(loadDeployment([config]).warnings);
  expect(lines).toEqual([
    `${config}: compatability_flags: is not a key celld knows, so it has no effect (did you mean "compatibility_flags"?)`,
    expect.stringMatching(/: compatibility_date: is not set; running with "\d{4}-\d\d-\d\d"/),
    `${config}: services[0].service: no Worker named "auth-service" in this deployment (its Workers: "gateway"); ` +
      "started without it: requests through env.AUTH are answered 503, naming it",
    `${config}: durable_objects.bindings[0].script_name: no Worker named "limiter-worker" in this deployment ` +
      `(its Workers: "gateway"); started without it: calls through env.RATE_LIMITER fail with an error naming it`,
  ]);
  const h = await runHost([config], p.dataDir);
  expect(await (await h.fetch("/")).text()).toBe("hello from the gateway");
  const started = Date.now();
  const result = (await (await h.fetch("/call")).json()) as Record<string, { status?: number; body?: string; ok?: boolean; error?: string }>;
  expect(Date.now() - started).toBeLessThan(5_000);
  const service = 'env.AUTH is bound to the Worker "auth-service", which is not part of this celld deployment; add its config with another -c to run it';
  const durableObject =
    'env.RATE_LIMITER is bound to the Durable Object class "RateLimiter" of the Worker "limiter-worker", which is not ' +
    "part of this celld deployment; add its config with another -c to run it";
  expect(result).toEqual({
    auth: { status: 503, body: service },
    verify: { ok: false, error: service },
    limiterFetch: { ok: true, value: { status: 503, body: durableObject } },
    hit: { ok: false, error: durableObject },
  });
});

test("two configs: the API queues for the mailer, which consumes and answers through its service binding", async () => {
  const p = copyOf("two-workers");
  const h = await runHost([join(p.dir, "api", "wrangler.toml"), join(p.dir, "mailer", "wrangler.jsonc")], p.dataDir);
  const order = await h.fetch("/api/orders", { method: "POST", body: JSON.stringify({ email: "a@example.com", item: "tea" }) });
  expect(order.status).toBe(202);
  h.clock.advance(1_000);
  const sent = await eventually(async () => {
    const list = (await (await h.fetch("/api/sent")).json()) as unknown[];
    return list.length > 0 ? list : undefined;
  }, "the mailer's record of the e-mail");
  expect(sent).toEqual([{ to: "a@example.com", subject: "Your order of tea" }]);
});

test("a D1 app with migrations starts; the start-up line names the commands that apply them", async () => {
  const p = copyOf("d1-notes");
  const config = join(p.dir, "wrangler.jsonc");
  const lines = formatWarnings(loadDeployment([config]).warnings);
  expect(lines).toEqual([
    expect.stringContaining("observability: is a deploy setting with no effect on a local host; ignored"),
    expect.stringMatching(
      /^.*wrangler\.jsonc: d1_databases\[0\]: D1 database "notes-db" has migrations in \/.*\/migrations, which celld dev does not apply \(nor does wrangler dev\); see which are applied with "celld d1 migrations list notes-db -c .*wrangler\.jsonc" and apply the rest with "celld d1 migrations apply notes-db -c .*wrangler\.jsonc" while celld is stopped$/,
    ),
  ]);
  const h = await runHost([config], p.dataDir);
  // Before the migrations, the Worker starts and meets D1's own error for the missing table.
  expect((await h.fetch("/notes")).status).toBe(500);
  expect(await (await h.fetch("/tables")).json()).toEqual([]);
});

test("celld dev, with no option but a free port, starts a static site whose Worker consumes its own queue", { timeout: 120_000 }, async () => {
  const p = copyOf("assets-consumer");
  // As a user starts it: in the project's directory, the config found as wrangler finds it.
  const r = run(["dev", "--port", "0"], p.dir);
  try {
    const [, url] = await waitFor(r, /Worker "landing-page" listening on (http:\/\/\S+)/, 90_000);
    const page = await fetch(new URL("/", url));
    expect(await page.text()).toContain("<h1>Coming soon</h1>");
    const missing = await fetch(new URL("/nowhere", url));
    expect([missing.status, await missing.text()]).toEqual([404, expect.stringContaining("<h1>Not here</h1>")]);
    const form = new FormData();
    form.set("email", "a@example.com");
    const signup = await fetch(new URL("/api/signup", url), { method: "POST", body: form });
    expect(signup.status).toBe(202);
    await waitFor(r, /signed up: a@example\.com/, 30_000);
    expect(r.output()).not.toMatch(/error/i);
  } finally {
    r.kill("SIGTERM");
    await r.exited;
  }
});
