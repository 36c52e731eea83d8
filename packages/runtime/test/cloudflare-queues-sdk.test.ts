import Cloudflare from "cloudflare";
import { describe, expect, it } from "vitest";
import { apiHarness } from "./api-harness.ts";

// The real `cloudflare` SDK (7.3.0) publishing to and pulling from celld through /client/v4.
const account_id = "acme";

async function setup(options: { scopes?: Parameters<Awaited<ReturnType<typeof apiHarness>>["key"]>[0] } = {}) {
  const api = await apiHarness();
  const sdk = (key = api.defaultKey) => new Cloudflare({ apiToken: key, baseURL: `${api.server.url}/client/v4`, maxRetries: 0 });
  const cf = sdk(options.scopes === undefined ? undefined : api.key(options.scopes));
  const admin = sdk();
  const queue = await admin.queues.create({ account_id, queue_name: "jobs" });
  await admin.queues.consumers.create(queue.queue_id!, { account_id, type: "http_pull", settings: { batch_size: 10, max_retries: 2 } } as never);
  const counts = async () => (await api.call("GET", api.queuePath("jobs"))).json.counts;
  return { api, cf, admin, queueId: queue.queue_id!, counts };
}

describe("cloudflare SDK against celld", () => {
  it("push, bulk push, pull and ack, with each content type", async () => {
    const { cf, queueId, counts } = await setup();
    const pushed = await cf.queues.messages.push(queueId, { account_id, body: { hello: "world" }, content_type: "json" });
    expect(pushed.metadata?.metrics?.backlog_count).toBe(1);
    await cf.queues.messages.push(queueId, { account_id, body: "plain text", content_type: "text" });
    await cf.queues.messages.bulkPush(queueId, {
      account_id,
      messages: [
        { body: { n: 1 }, content_type: "json" },
        { body: Buffer.from([1, 2, 3]).toString("base64"), content_type: "bytes" },
      ] as never,
    });
    expect((await counts()).ready).toBe(4);

    const pulled = await cf.queues.messages.pull(queueId, { account_id, batch_size: 10, visibility_timeout_ms: 5000 });
    const messages = pulled.messages!;
    expect(messages).toHaveLength(4);
    expect(pulled.message_backlog_count).toBe(4);
    const byType = (t: string) => messages.filter((m) => m.metadata?.["CF-Content-Type" as never] === t);
    expect(byType("text")[0]!.body).toBe("plain text");
    const json = byType("json").map((m) => JSON.parse(Buffer.from(m.body!, "base64").toString()));
    expect(json).toEqual(expect.arrayContaining([{ hello: "world" }, { n: 1 }]));
    expect([...Buffer.from(byType("bytes")[0]!.body!, "base64")]).toEqual([1, 2, 3]);
    for (const m of messages) expect(m).toMatchObject({ attempts: 1, id: expect.any(String), lease_id: expect.any(String) });

    const [first, second, ...rest] = messages;
    const acked = await cf.queues.messages.ack(queueId, {
      account_id,
      acks: [{ lease_id: first!.lease_id! }, ...rest.map((m) => ({ lease_id: m.lease_id! }))],
      retries: [{ lease_id: second!.lease_id!, delay_seconds: 0 }],
    });
    expect(acked).toMatchObject({ ackCount: 3, retryCount: 1, warnings: [] });
    const again = await cf.queues.messages.pull(queueId, { account_id, batch_size: 10 });
    expect(again.messages!.map((m) => [m.id, m.attempts])).toEqual([[second!.id, 2]]);
    expect(await counts()).toMatchObject({ ready: 0, leased: 1 });
  });

  it("fences a lease whose visibility timeout passed: the late ack is reported, not applied", async () => {
    const { api, cf, queueId, counts } = await setup();
    await cf.queues.messages.push(queueId, { account_id, body: "once", content_type: "text" });
    const first = (await cf.queues.messages.pull(queueId, { account_id, visibility_timeout_ms: 1000 })).messages![0]!;
    api.clock.advance(1500);
    const second = (await cf.queues.messages.pull(queueId, { account_id, visibility_timeout_ms: 60_000 })).messages![0]!;
    expect(second.id).toBe(first.id);
    expect(second.attempts).toBe(2);

    const late = await cf.queues.messages.ack(queueId, { account_id, acks: [{ lease_id: first.lease_id! }] });
    expect(late.ackCount).toBe(0);
    expect(late.warnings).toEqual([expect.stringMatching(/no longer current/)]);
    expect(await counts()).toMatchObject({ leased: 1 });

    const current = await cf.queues.messages.ack(queueId, { account_id, acks: [{ lease_id: second.lease_id! }] });
    expect(current).toMatchObject({ ackCount: 1, warnings: [] });
    expect(await counts()).toMatchObject({ ready: 0, leased: 0 });
  });

  it("a number past 2^53 - 1 is refused quoting the text sent, in each kind of body", async () => {
    const { api, admin, queueId, counts } = await setup();
    const raw = async (method: string, path: string, text: string) => {
      const res = await fetch(`${api.server.url}/client/v4/accounts/${account_id}/queues/${queueId}${path}`, {
        method,
        headers: { authorization: `Bearer ${api.defaultKey}`, "content-type": "application/json" },
        body: text,
      });
      return { status: res.status, error: ((await res.json()) as { errors: Array<{ code: number; message: string }> }).errors[0] };
    };
    expect(await raw("POST", "/messages/pull", '{"batch_size": 9007199254740993}')).toEqual({
      status: 400,
      error: { code: 10207, message: "batch_size must be an integer from 1 to 100, got 9007199254740993" },
    });
    expect(await raw("POST", "/messages/batch", '{"messages": [{"body": "x", "content_type": "text", "delay_seconds": -1e400}]}')).toMatchObject({
      status: 400,
      error: { message: "messages[0].delay_seconds must be an integer from 0 to 86400 seconds, got -1e400" },
    });
    expect(await raw("PATCH", "", '{"settings": {"message_retention_period": 1e999}}')).toMatchObject({
      status: 400,
      error: { code: 100128, message: "settings.message_retention_period must be an integer from 60 to 1209600 seconds, got 1e999" },
    });
    const consumer = (await admin.queues.consumers.list(queueId, { account_id })).result[0] as { consumer_id: string } | undefined;
    expect(await raw("PUT", `/consumers/${consumer!.consumer_id}`, '{"type": "http_pull", "settings": {"max_retries": 12345678901234567891}}')).toEqual({
      status: 400,
      error: { code: 100127, message: "settings.max_retries must be an integer from 0 to 100, got 12345678901234567891" },
    });
    expect((await counts()).ready).toBe(0);
  });

  it("refuses bad input in Cloudflare's shape, changing nothing", async () => {
    const { api, cf, queueId, counts } = await setup();
    const other = await cf.queues.create({ account_id, queue_name: "other" });
    await cf.queues.messages.push(other.queue_id!, { account_id, body: "x", content_type: "text" });
    const otherLease = (await cf.queues.messages.pull(other.queue_id!, { account_id })).messages![0]!.lease_id!;
    const refusal = async (call: Promise<unknown>) => {
      const error = (await call.then(() => undefined, (e: unknown) => e)) as { status: number; errors: Array<{ code: number; message: string }> };
      expect(error, "the call was refused").toBeDefined();
      return { status: error.status, code: error.errors[0]!.code, message: error.errors[0]!.message };
    };

    expect(await refusal(cf.queues.messages.push("que_aaaaaa01M96V8VEXFQGS62FZ0K400C8F", { account_id, body: 1 }))).toMatchObject({ status: 404, code: 10104 });
    expect(await refusal(cf.queues.messages.push("not-a-queue", { account_id, body: 1 }))).toMatchObject({ status: 400, code: 10107 });
    const tooMany = Array.from({ length: 101 }, (_, i) => ({ body: i }));
    expect(await refusal(cf.queues.messages.bulkPush(queueId, { account_id, messages: tooMany as never }))).toMatchObject({ status: 400, code: 10206 });
    expect(await refusal(cf.queues.messages.pull(queueId, { account_id, visibility_timeout_ms: 12 * 3600 * 1000 + 1 }))).toMatchObject({
      status: 400,
      code: 10207,
      message: expect.stringMatching(/visibility_timeout_ms .*43200000/),
    });
    expect(await refusal(cf.queues.messages.push(queueId, { account_id, body: "x".repeat(128_001), content_type: "text" }))).toMatchObject({ status: 400, code: 10204 });
    expect(await refusal(cf.queues.messages.ack(queueId, { account_id, acks: [{ lease_id: "forged" }] }))).toMatchObject({
      status: 400,
      message: expect.stringMatching(/acks\[0\]\.lease_id is not a lease_id/),
    });
    expect(await refusal(cf.queues.messages.ack(queueId, { account_id, acks: [{ lease_id: otherLease }] }))).toMatchObject({
      status: 400,
      message: expect.stringMatching(/lease of another queue/),
    });
    expect(await refusal(cf.queues.update(queueId, { account_id, queue_name: "jobs", settings: { message_retention_period: 59 } } as never))).toMatchObject({
      status: 400,
      code: 100128,
    });
    expect(await counts()).toMatchObject({ ready: 0, leased: 0, delayed: 0 });
    // The other queue's lease is untouched by the refused ack.
    expect((await api.call("GET", api.queuePath("other"))).json.counts).toMatchObject({ leased: 1 });
  });

  it("a key without events:publish may not push (9109); a wrong token is 10000", async () => {
    const { api, queueId, counts } = await setup();
    const reader = new Cloudflare({ apiToken: api.key(["events:read", "events:write"]), baseURL: `${api.server.url}/client/v4`, maxRetries: 0 });
    const denied = await reader.queues.messages.push(queueId, { account_id, body: 1 }).catch((e: { status: number; errors: Array<{ code: number }> }) => e);
    expect(denied).toMatchObject({ status: 403, errors: [{ code: 9109 }] });
    const stranger = new Cloudflare({ apiToken: "ck_wrong", baseURL: `${api.server.url}/client/v4`, maxRetries: 0 });
    const wrong = await stranger.queues.messages.push(queueId, { account_id, body: 1 }).catch((e: { status: number; errors: Array<{ code: number }> }) => e);
    expect(wrong).toMatchObject({ status: 401, errors: [{ code: 10000 }] });
    expect((await counts()).ready).toBe(0);
  });
});
