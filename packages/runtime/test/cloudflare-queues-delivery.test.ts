import Cloudflare from "cloudflare";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { Catalog } from "../src/api/catalog.ts";
import { startApiServer } from "../src/api/server.ts";
import { apiHarness } from "./api-harness.ts";

// Pause, purge and per-queue retention through the real `cloudflare` SDK, and the same settings
// in the native API.
const account_id = "acme";

async function setup() {
  const api = await apiHarness();
  const cf = new Cloudflare({ apiToken: api.defaultKey, baseURL: `${api.server.url}/client/v4`, maxRetries: 0 });
  const queue = await cf.queues.create({ account_id, queue_name: "jobs" });
  const queueId = queue.queue_id!;
  const counts = async () => (await api.call("GET", api.queuePath("jobs"))).json.counts;
  const text = (body: string) => cf.queues.messages.push(queueId, { account_id, body, content_type: "text" });
  return { api, cf, queueId, counts, text };
}

describe("pause and resume", () => {
  it("a paused queue takes sends and refuses pulls with 409 queue_delivery_paused; resumed, it delivers", async () => {
    const { api, cf, queueId, counts, text } = await setup();
    const paused = await cf.queues.edit(queueId, { account_id, settings: { delivery_paused: true } } as never);
    expect(paused.settings).toMatchObject({ delivery_paused: true, delivery_delay: 0, message_retention_period: 345_600 });
    await text("while paused");
    expect((await counts()).ready).toBe(1);
    const refused = await cf.queues.messages.pull(queueId, { account_id }).catch((e: { status: number; errors: Array<{ message: string }>; headers: Headers }) => e);
    expect(refused).toMatchObject({ status: 409, errors: [{ message: expect.stringMatching(/^queue_delivery_paused/) }] });
    // The SDK is told not to retry it.
    expect((refused as { headers: Headers }).headers.get("x-should-retry")).toBe("false");
    // The native API sees the same state, and refuses its lease too.
    expect((await api.call("GET", api.queuePath("jobs"))).json.delivery_paused).toBe(true);
    expect((await api.call("POST", `${api.queuePath("jobs")}:lease`, { body: {} })).status).toBe(409);
    // A merge: the other settings stay.
    await cf.queues.edit(queueId, { account_id, settings: { delivery_paused: false } } as never);
    expect((await cf.queues.get(queueId, { account_id })).settings).toMatchObject({ delivery_paused: false });
    const pulled = await cf.queues.messages.pull(queueId, { account_id });
    expect(pulled.messages!.map((m) => m.body)).toEqual(["while paused"]);
  });

  it("the native API pauses and resumes too, and the pause survives a reopen of the cell", async () => {
    const { api, cf, queueId } = await setup();
    const res = await api.call("PATCH", api.queuePath("jobs"), { body: { delivery_paused: true } });
    expect(res.json.delivery_paused).toBe(true);
    const name = "orgs/acme/projects/shop/envs/prod/queues/jobs";
    await api.registry.close(name);
    expect((await cf.queues.get(queueId, { account_id })).settings).toMatchObject({ delivery_paused: true });
  });
});

describe("purge", () => {
  it("deletes every message in every state; leases in flight become stale; later sends are kept", async () => {
    const { cf, queueId, counts, text } = await setup();
    await text("leased");
    const lease = (await cf.queues.messages.pull(queueId, { account_id, batch_size: 1 })).messages![0]!;
    await text("ready");
    await cf.queues.messages.push(queueId, { account_id, body: "delayed", content_type: "text", delay_seconds: 3600 });
    expect(await counts()).toMatchObject({ ready: 1, delayed: 1, leased: 1 });
    await cf.queues.purge.start(queueId, { account_id, delete_messages_permanently: true });
    expect(await counts()).toMatchObject({ ready: 0, delayed: 0, leased: 0 });
    expect(await cf.queues.purge.status(queueId, { account_id })).toMatchObject({ completed: "true", started_at: expect.any(String) });
    const late = await cf.queues.messages.ack(queueId, { account_id, acks: [{ lease_id: lease.lease_id! }] });
    expect(late).toMatchObject({ ackCount: 0, warnings: [expect.stringMatching(/no longer current/)] });
    await text("after");
    expect((await cf.queues.messages.pull(queueId, { account_id })).messages!.map((m) => m.body)).toEqual(["after"]);
  });

  it("a send racing the purge is kept when it commits after the cut, never lost", async () => {
    const { api, cf, queueId } = await setup();
    const name = "orgs/acme/projects/shop/envs/prod/queues/jobs";
    const cell = await api.registry.open(name);
    const enc = (s: string) => ({ body: new TextEncoder().encode(s), contentType: "text" });
    await cell.send([enc("before")]);
    // Submitted together, they share a write group: the purge's cut is taken first, then the send commits.
    const purged = cell.purge("all");
    const racing = cell.send([enc("racing")]);
    expect(await purged).toEqual({ purged: 1 });
    await racing;
    const left = (await cf.queues.messages.pull(queueId, { account_id, batch_size: 10 })).messages!.map((m) => m.body);
    expect(left).toEqual(["racing"]);
  });

  it("the purge status survives a restart of the API", async () => {
    const { api, cf, queueId, text } = await setup();
    await text("gone");
    await cf.queues.purge.start(queueId, { account_id, delete_messages_permanently: true });
    const before = await cf.queues.purge.status(queueId, { account_id });
    expect(before).toMatchObject({ completed: "true", started_at: expect.any(String) });
    await api.server.close();
    const again = await startApiServer({ registry: api.registry, keys: api.keys, dataDir: api.dataDir, clock: api.clock, port: 0 });
    onTestFinished(() => again.close());
    const cf2 = new Cloudflare({ apiToken: api.defaultKey, baseURL: `${again.url}/client/v4`, maxRetries: 0 });
    expect(await cf2.queues.purge.status(queueId, { account_id })).toEqual(before);
  });

  it("a purge a stop interrupted is finished at the next start, with its own cut", async () => {
    const { api, queueId, text } = await setup();
    const name = "orgs/acme/projects/shop/envs/prod/queues/jobs";
    await text("sent before the purge");
    await api.server.close();
    // What the purge route writes before its first slice, as if celld had stopped right after.
    const cell = await api.registry.open(name);
    const cut = await cell.purgeCut();
    const catalog = Catalog.open(api.dataDir);
    catalog.startPurge({ queue: name, startedMs: api.clock.now(), ...cut });
    catalog.close();
    await cell.send([{ body: new TextEncoder().encode("sent after it began"), contentType: "text" }]);

    const again = await startApiServer({ registry: api.registry, keys: api.keys, dataDir: api.dataDir, clock: api.clock, port: 0 });
    onTestFinished(() => again.close());
    const cf2 = new Cloudflare({ apiToken: api.defaultKey, baseURL: `${again.url}/client/v4`, maxRetries: 0 });
    await vi.waitFor(async () => expect(await cf2.queues.purge.status(queueId, { account_id })).toMatchObject({ completed: "true" }));
    const left = (await cf2.queues.messages.pull(queueId, { account_id, batch_size: 10 })).messages!.map((m) => m.body);
    expect(left).toEqual(["sent after it began"]);
  });

  it("refuses a purge without delete_messages_permanently, deleting nothing", async () => {
    const { cf, queueId, counts, text } = await setup();
    await text("kept");
    const refused = await cf.queues.purge.start(queueId, { account_id } as never).catch((e: { status: number }) => e);
    expect(refused).toMatchObject({ status: 400 });
    expect((await counts()).ready).toBe(1);
  });
});

describe("retention per queue", () => {
  it("lowered below a message's age, the message goes; younger ones stay; bounds 60 to 1,209,600", async () => {
    const { api, cf, queueId, counts, text } = await setup();
    await text("old");
    api.clock.advance(3_600_000);
    await text("young");
    const updated = await cf.queues.edit(queueId, { account_id, settings: { message_retention_period: 1800 } } as never);
    expect(updated.settings).toMatchObject({ message_retention_period: 1800 });
    expect((await counts()).ready).toBe(1);
    expect((await cf.queues.messages.pull(queueId, { account_id })).messages!.map((m) => m.body)).toEqual(["young"]);
    expect((await api.call("GET", api.queuePath("jobs"))).json.retention).toBe(1800);
    for (const bad of [59, 1_209_601]) {
      const refused = await cf.queues.edit(queueId, { account_id, settings: { message_retention_period: bad } } as never).catch((e: { status: number; errors: Array<{ code: number }> }) => e);
      expect(refused).toMatchObject({ status: 400, errors: [{ code: 100128 }] });
    }
    for (const good of [60, 1_209_600]) {
      const ok = await cf.queues.edit(queueId, { account_id, settings: { message_retention_period: good } } as never);
      expect(ok.settings).toMatchObject({ message_retention_period: good });
    }
    const native = await api.call("PATCH", api.queuePath("jobs"), { body: { retention: 59 } });
    expect(native.status).toBe(400);
    expect(native.json.error).toMatchObject({ field: "retention" });
  });

  it("a queue created with a retention and a delivery delay keeps both", async () => {
    const { api, cf } = await setup();
    const created = await cf.queues.create({ account_id, queue_name: "slow", settings: { delivery_delay: 30, message_retention_period: 7200 } } as never);
    expect(created.settings).toMatchObject({ delivery_delay: 30, message_retention_period: 7200, delivery_paused: false });
    await cf.queues.messages.push(created.queue_id!, { account_id, body: "later", content_type: "text" });
    const counts = (await api.call("GET", api.queuePath("slow"))).json.counts;
    expect(counts).toMatchObject({ ready: 0, delayed: 1 });
  });
});
