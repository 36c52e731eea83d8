import { describe, expect, it } from "vitest";
import { QueuesApiError, QueuesClient, type LeasedMessage } from "../src/client/index.ts";
import { apiHarness, eventually, testEnv } from "./api-harness.ts";

async function consumeHarness() {
  const h = await apiHarness();
  await h.createQueue("jobs");
  const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv });
  const counts = async () => (await client.getQueue("jobs")).counts!;
  const send = (...ids: string[]) => client.send("jobs", ids.map((id) => ({ id, source: "/c", type: "t", data: { id } })));
  return { h, client, counts, send };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("consume", () => {
  it("runs the handler for each message and acks it", async () => {
    const { client, counts, send } = await consumeHarness();
    const seen: string[] = [];
    const consumer = client.consume("jobs", (m) => void seen.push(m.event.id));
    await send("a", "b", "c");
    await eventually(() => seen.length === 3);
    const stats = await consumer.stop();
    expect(seen.sort()).toEqual(["a", "b", "c"]);
    expect(stats).toEqual({ leased: 3, acked: 3, nacked: 0, stale: 0 });
    expect(await counts()).toMatchObject({ ready: 0, leased: 0 });
    await client.close();
  });

  it("nacks a message whose handler threw, with the retry delay; it comes back and succeeds", async () => {
    const { h, client, counts, send } = await consumeHarness();
    const attempts: number[] = [];
    const errors: unknown[] = [];
    const consumer = client.consume(
      "jobs",
      (m) => {
        attempts.push(m.deliveryCount);
        if (m.deliveryCount === 1) throw new Error("first try fails");
      },
      { retryDelay: 30, onError: (e) => errors.push(e) },
    );
    await send("flaky");
    await eventually(async () => attempts.length === 1 && (await counts()).delayed === 1);
    h.clock.advance(30_000);
    await eventually(async () => attempts.length === 2 && (await counts()).leased === 0);
    const stats = await consumer.stop();
    expect(attempts).toEqual([1, 2]);
    expect(errors.map(String)).toEqual(["Error: first try fails"]);
    expect(stats).toMatchObject({ leased: 2, acked: 1, nacked: 1 });
    await client.close();
  });

  it("stop() ends a waiting poll at once, and nothing is held for it", async () => {
    const { h, client, counts, send } = await consumeHarness();
    const handled: string[] = [];
    let consumer!: ReturnType<typeof client.consume>;
    await h.whenWaiting(async () => (consumer = client.consume("jobs", (m) => void handled.push(m.event.id))).done);
    const stats = await consumer.stop();
    expect(stats.leased).toBe(0);
    await send("after-stop");
    await eventually(async () => (await counts()).ready === 1);
    const [m] = await client.lease("jobs");
    expect(m!.deliveryCount).toBe(1);
    expect(handled).toEqual([]);
    await client.close();
  });

  it("stop() lets the running handler finish and settles its message", async () => {
    const { client, counts, send } = await consumeHarness();
    const gate = deferred();
    const started = deferred();
    const consumer = client.consume("jobs", async () => {
      started.resolve();
      await gate.promise;
    });
    await send("slow");
    await started.promise;
    const stopping = consumer.stop();
    gate.resolve();
    expect(await stopping).toMatchObject({ leased: 1, acked: 1 });
    expect(await counts()).toMatchObject({ ready: 0, leased: 0 });
    await client.close();
  });

  it("an ack after the lease ran out and another worker leased the message comes back stale", async () => {
    const { h, client, counts, send } = await consumeHarness();
    const gate = deferred();
    const started = deferred();
    let taken: LeasedMessage | undefined;
    const consumer = client.consume(
      "jobs",
      async () => {
        started.resolve();
        await gate.promise;
      },
      { visibilityTimeout: 10 },
    );
    await send("contended");
    await started.promise;
    h.clock.advance(10_000);
    // Another worker takes the message while the first still works on it.
    [taken] = await client.lease("jobs", { visibilityTimeout: 60 });
    expect(taken!.leaseGeneration).toBe(2);
    gate.resolve();
    await eventually(() => consumer.stats.stale === 1);
    await consumer.stop();
    expect(await counts()).toMatchObject({ leased: 1 });
    expect((await client.ack("jobs", [taken!])).acked).toBe(1);
    await client.close();
  });

  it("a lease refused for good ends the loop: done rejects with the API's error", async () => {
    const { client } = await consumeHarness();
    const consumer = client.consume("missing", () => undefined);
    const error = await consumer.done.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueuesApiError);
    expect(error).toMatchObject({ status: 404, code: "not_found" });
    await client.close();
  });

  it("an abort signal stops the loop like stop()", async () => {
    const { h, client } = await consumeHarness();
    const controller = new AbortController();
    let consumer!: ReturnType<typeof client.consume>;
    await h.whenWaiting(async () => (consumer = client.consume("jobs", () => undefined, { signal: controller.signal })).done);
    controller.abort();
    expect(await consumer.done).toEqual({ leased: 0, acked: 0, nacked: 0, stale: 0 });
    await client.close();
  });
});
