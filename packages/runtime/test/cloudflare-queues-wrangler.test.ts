import { describe, expect, it } from "vitest";
import { apiHarness } from "./api-harness.ts";
import { wranglerAgainst } from "./wrangler-cli.ts";

// The real wrangler 4.86.0 managing queues on celld through /client/v4, each output checked.
// A wrangler run takes 5 to 15 s on a shared 2-core machine: hence the long timeouts.
describe("wrangler queues against celld", () => {
  it("create, list, info, update, delete", { timeout: 300_000 }, async () => {
    const api = await apiHarness();
    const wrangler = wranglerAgainst(api.server.url, api.defaultKey, "acme");
    const created = await wrangler(["queues", "create", "orders", "--delivery-delay-secs", "5"]);
    expect(created.stderr).toBe("");
    expect(created.stdout).toContain("Created queue 'orders'");

    const list = await wrangler(["queues", "list"]);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/orders/);
    expect(list.stdout).toMatch(/que_/);

    const info = await wrangler(["queues", "info", "orders"]);
    expect(info.code).toBe(0);
    expect(info.stdout).toContain("Queue Name: orders");
    expect(info.stdout).toMatch(/Queue ID: que_/);

    const native = await api.call("GET", api.queuePath("orders"));
    expect(native.json.delivery_delay).toBe(5);

    const updated = await wrangler(["queues", "update", "orders", "--delivery-delay-secs", "10"]);
    expect(updated.code).toBe(0);
    expect((await api.call("GET", api.queuePath("orders"))).json.delivery_delay).toBe(10);

    const deleted = await wrangler(["queues", "delete", "orders"]);
    expect(deleted.code).toBe(0);
    expect((await api.call("GET", api.queuePath("orders"))).status).toBe(404);
    const gone = await wrangler(["queues", "info", "orders"]);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr + gone.stdout).toMatch(/does not exist/);
  });

  it("consumer add and remove, Worker and http_pull", { timeout: 300_000 }, async () => {
    const api = await apiHarness();
    const wrangler = wranglerAgainst(api.server.url, api.defaultKey, "acme");
    expect((await wrangler(["queues", "create", "jobs"])).code).toBe(0);
    expect((await wrangler(["queues", "create", "jobs-dlq"])).code).toBe(0);

    const add = await wrangler(["queues", "consumer", "add", "jobs", "mailer", "--batch-size", "5", "--message-retries", "2", "--dead-letter-queue", "jobs-dlq"]);
    expect(add.stderr).toBe("");
    expect(add.stdout).toContain("Added consumer to queue jobs");
    let info = await wrangler(["queues", "info", "jobs"]);
    expect(info.stdout).toMatch(/worker:mailer/);
    let native = (await api.call("GET", api.queuePath("jobs"))).json;
    expect(native).toMatchObject({ max_deliveries: 3, dead_letter_queue: expect.stringMatching(/\/queues\/jobs-dlq$/) });

    // One consumer per queue.
    const second = await wrangler(["queues", "consumer", "http", "add", "jobs"]);
    expect(second.code).not.toBe(0);
    expect(second.stderr + second.stdout).toMatch(/already has a consumer/);

    const remove = await wrangler(["queues", "consumer", "remove", "jobs", "mailer"]);
    expect(remove.code).toBe(0);
    expect(remove.stdout).toContain("Removed consumer from queue jobs");

    const http = await wrangler(["queues", "consumer", "http", "add", "jobs", "--batch-size", "20", "--message-retries", "4", "--visibility-timeout-secs", "90"]);
    expect(http.stderr).toBe("");
    info = await wrangler(["queues", "info", "jobs"]);
    expect(info.stdout).toMatch(/HTTP Pull Consumer/i);
    native = (await api.call("GET", api.queuePath("jobs"))).json;
    expect(native).toMatchObject({ max_deliveries: 5, visibility_timeout: 90 });

    const httpRemove = await wrangler(["queues", "consumer", "http", "remove", "jobs"]);
    expect(httpRemove.code).toBe(0);
    info = await wrangler(["queues", "info", "jobs"]);
    expect(info.stdout).toMatch(/Number of Consumers: 0/);
  });

  it("update --message-retention-period-secs, pause-delivery, resume-delivery, purge --force", { timeout: 300_000 }, async () => {
    const api = await apiHarness();
    const wrangler = wranglerAgainst(api.server.url, api.defaultKey, "acme");
    expect((await wrangler(["queues", "create", "mail", "--message-retention-period-secs", "7200"])).code).toBe(0);
    expect((await api.call("GET", api.queuePath("mail"))).json.retention).toBe(7200);
    const retention = await wrangler(["queues", "update", "mail", "--message-retention-period-secs", "3600"]);
    expect(retention.stdout).toContain("Updated queue mail");
    expect((await api.call("GET", api.queuePath("mail"))).json.retention).toBe(3600);

    const pause = await wrangler(["queues", "pause-delivery", "mail"]);
    expect(pause.stdout).toContain("Paused message delivery for queue mail");
    expect((await api.call("GET", api.queuePath("mail"))).json).toMatchObject({ delivery_paused: true, retention: 3600 });
    const resume = await wrangler(["queues", "resume-delivery", "mail"]);
    expect(resume.stdout).toContain("Resumed message delivery for queue mail");
    expect((await api.call("GET", api.queuePath("mail"))).json.delivery_paused).toBe(false);

    await api.call("POST", `${api.queuePath("mail")}:send`, { body: { events: [{ specversion: "1.0", id: "1", source: "/t", type: "t" }] } });
    expect((await api.call("GET", api.queuePath("mail"))).json.counts.ready).toBe(1);
    const purge = await wrangler(["queues", "purge", "mail", "--force"]);
    expect(purge.code).toBe(0);
    expect(purge.stdout).toContain("Purged Queue 'mail'");
    expect((await api.call("GET", api.queuePath("mail"))).json.counts.ready).toBe(0);
  });

  it("refuses a key without events:write (9109) and changes nothing", { timeout: 120_000 }, async () => {
    const api = await apiHarness();
    const wrangler = wranglerAgainst(api.server.url, api.key(["events:read"]), "acme");
    const out = await wrangler(["queues", "create", "nope"]);
    expect(out.code).not.toBe(0);
    expect(out.stderr + out.stdout).toMatch(/9109/);
    expect(out.stderr + out.stdout).toMatch(/events:write/);
    expect((await api.call("GET", api.queuePath("nope"))).status).toBe(404);
  });
});
