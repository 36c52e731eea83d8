import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { describe, expect, it, onTestFinished } from "vitest";
import { systemClock } from "@celld/queue-cell";
import { metricsHarness } from "./metrics-harness.ts";

/** Debian's chromium; .ci/run installs it. */
const chromiumPath = process.env["CELLD_CHROMIUM"] ?? "/usr/bin/chromium";
const env = "orgs/acme/projects/shop/envs/prod";
type Leased = { id: string; lease_generation: number };

async function browser(): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), "celld-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1200, height: 800 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  onTestFinished(async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  });
  return context;
}

/** A page that fails the test on any request off its origin and any CSP violation or page error. */
async function watchedPage(context: BrowserContext, origin: string): Promise<{ page: Page; problems: string[] }> {
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("request", (req) => {
    if (!req.url().startsWith(origin)) problems.push(`request off origin: ${req.url()}`);
  });
  page.on("console", (msg) => {
    if (msg.type() === "error" && !/Failed to load resource: the server responded with a status of 40[34]/.test(msg.text())) {
      problems.push(`console: ${msg.text()}`);
    }
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("dialog", (dialog) => void dialog.accept());
  return { page, problems };
}

async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/`);
  await page.locator("#key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("who").waitFor();
}

describe("the dashboard in Chromium", () => {
  // And with the cells on worker threads, whose counts the gauges read from each cell's mirror.
  it.each([
    ["", undefined],
    [", cells on 2 threads", 2],
  ])("signs in, watches a backlog rise, browses a message, replays a dead letter that is then delivered%s", async (_what, cellThreads) => {
    const h = await metricsHarness({ clock: systemClock, ...(cellThreads === undefined ? {} : { cellThreads }) });
    const admin = h.key(env, ["events:publish", "events:write", "events:read", "metrics:read"]);
    const url = h.server.url;
    const jobs = `/v1/${env}/queues/jobs`;
    expect((await h.call("POST", `/v1/${env}/queues`, { key: admin, body: { name: "jobs", max_deliveries: 1 } })).status).toBe(201);
    await h.call("POST", `/v1/${env}/queues`, { key: admin, body: { name: "emails" } });

    const context = await browser();
    const { page, problems } = await watchedPage(context, url);
    const csp = (await page.request.get(`${url}/dashboard/`)).headers()["content-security-policy"];
    expect(csp).toMatch(/^default-src 'none'; script-src 'self' 'sha256-[A-Za-z0-9+/=]+'; style-src 'self'; connect-src 'self'/);
    await signIn(page, url, admin);
    expect(await page.getByTestId("who").textContent()).toContain(env);
    const backlog = page.locator('tr[data-queue="jobs"] td[data-col="backlog"]');
    await expect.poll(() => backlog.textContent(), { timeout: 10_000 }).toBe("0");

    const events = ["a", "b", "c"].map((id) => ({ specversion: "1.0", id, source: "/tests", type: "test.event", data: { n: id } }));
    await h.call("POST", `${jobs}:send`, { key: admin, body: { events } });
    await expect.poll(() => backlog.textContent(), { timeout: 10_000 }).toBe("3");
    await expect.poll(() => page.locator('tr[data-queue="jobs"] td[data-col="sent-rate"]').textContent(), { timeout: 10_000 }).not.toBe("—");
    await page.getByTestId("backlog-chart").locator("canvas").waitFor();
    const shot = process.env["CELLD_DASHBOARD_SCREENSHOT"];
    if (shot !== undefined) await page.screenshot({ path: shot, fullPage: true });

    await page.getByRole("link", { name: "jobs" }).click();
    await page.locator('button[data-action="browse"]').click();
    const rows = page.getByTestId("messages").locator("tbody tr");
    await expect.poll(() => rows.count()).toBe(3);
    expect(await rows.first().locator('td[data-col="body"]').textContent()).toBe('{"n":"a"}');
    // Browsing leased nothing.
    expect(await page.locator('td[data-col="in-flight"]').textContent()).toBe("0");

    // One message fails its only delivery: a dead letter.
    const [first] = JSON.parse((await h.call("POST", `${jobs}:lease`, { key: admin, body: { max_messages: 1 } })).text).messages as Leased[];
    await h.call("POST", `${jobs}:nack`, { key: admin, body: { messages: [{ id: first!.id, lease_generation: first!.lease_generation }] } });
    await expect.poll(() => page.locator('td[data-col="dead"]').textContent(), { timeout: 10_000 }).toBe("1");
    await page.getByTestId("dead-letters").locator(`tr[data-id="${first!.id}"]`).waitFor();
    await page.locator('button[data-action="replay-all"]').click();
    await expect.poll(() => page.getByTestId("notice").textContent()).toBe("Replayed 1 dead letter(s).");
    await expect.poll(() => page.locator('td[data-col="dead"]').textContent(), { timeout: 10_000 }).toBe("0");
    // The replayed message is delivered again: leased by a consumer, and acked.
    const leased = JSON.parse((await h.call("POST", `${jobs}:lease`, { key: admin, body: { max_messages: 10 } })).text).messages as Leased[];
    expect(leased.map((m) => m.id)).toContain(first!.id);
    await expect.poll(() => page.locator('td[data-col="in-flight"]').textContent(), { timeout: 10_000 }).toBe("3");
    await h.call("POST", `${jobs}:ack`, { key: admin, body: { messages: leased.map((m) => ({ id: m.id, lease_generation: m.lease_generation })) } });
    await expect.poll(() => page.locator('td[data-col="in-flight"]').textContent(), { timeout: 10_000 }).toBe("0");

    // A test message sent from the page, after its confirmation.
    await page.locator('button[data-action="send"]').click();
    await expect.poll(() => page.getByTestId("notice").textContent()).toMatch(/^Sent message [0-9A-Z]{26}\.$/);
    await expect.poll(() => page.locator('td[data-col="ready"]').textContent(), { timeout: 10_000 }).toBe("1");

    // Pause, resume, and purge the whole queue, each after its confirmation.
    await page.locator('button[data-action="pause"]').click();
    await expect.poll(() => page.locator('td[data-col="delivery"]').textContent()).toBe("paused");
    const refused = await h.call("POST", `${jobs}:lease`, { key: admin, body: { max_messages: 1 } });
    expect(refused.status).toBe(409);
    await page.locator('button[data-action="resume"]').click();
    await expect.poll(() => page.locator('td[data-col="delivery"]').textContent()).toBe("running");
    await page.locator('button[data-action="purge-queue"]').click();
    await expect.poll(() => page.getByTestId("notice").textContent()).toBe("Purged 1 message(s).");
    // The notice comes with the call's answer; the table follows with its own refresh.
    await expect.poll(() => page.locator('td[data-col="ready"]').textContent(), { timeout: 10_000 }).toBe("0");
    expect(problems).toEqual([]);
  });

  it("shows a read-only key no write buttons, and its forged write answers 403", async () => {
    const h = await metricsHarness({ clock: systemClock });
    const admin = h.key(env, ["events:publish", "events:write", "events:read"]);
    const reader = h.key(env, ["events:read"]);
    await h.call("POST", `/v1/${env}/queues`, { key: admin, body: { name: "jobs" } });
    const context = await browser();
    const { page, problems } = await watchedPage(context, h.server.url);
    await signIn(page, h.server.url, reader);
    await page.getByRole("link", { name: "jobs" }).click();
    await page.getByTestId("counts").waitFor();
    expect(await page.locator("button[data-action]").count()).toBe(0);
    expect(await page.textContent("main")).toContain("need a key with events:write");
    const forged = await page.evaluate(async (key) => {
      const res = await fetch(`/v1/orgs/acme/projects/shop/envs/prod/queues/jobs:replay`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: "{}",
      });
      return { status: res.status, body: (await res.json()) as { error: Record<string, unknown> } };
    }, reader);
    expect(forged.status).toBe(403);
    expect(forged.body.error).toMatchObject({ code: "permission_denied", required_scope: "events:write" });
    expect(problems).toEqual([]);
  });
});
