import { Pool, type Dispatcher } from "undici";
import { describe, expect, it } from "vitest";
import { limits, ManualClock } from "@celld/queue-cell";
import { QueuesApiError, QueuesClient, type LeasedMessage } from "../src/client/index.ts";
import { consume, leaseRetryAfterMs, leaseRetryAfterMsMax } from "../src/client/consume.ts";
import { apiHarness, event, eventually, testEnv, unreadLease } from "./api-harness.ts";

async function consumeHarness() {
  const h = await apiHarness();
  await h.createQueue("jobs");
  const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv });
  const counts = async () => (await client.getQueue("jobs")).counts!;
  const send = (...ids: string[]) => client.send("jobs", ids.map((id) => ({ id, source: "/c", type: "t", data: { id } })));
  return { h, client, counts, send };
}

/** A real pool that counts the requests it is given: how often a consumer calls the server. */
class CountingPool extends Pool {
  requests = 0;
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    this.requests += 1;
    return super.dispatch(options, handler);
  }
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
    const staleMessages: LeasedMessage[] = [];
    const consumer = client.consume(
      "jobs",
      async () => {
        started.resolve();
        await gate.promise;
      },
      { visibilityTimeout: 10, onStale: (message) => staleMessages.push(message) },
    );
    await send("contended");
    await started.promise;
    h.clock.advance(10_000);
    // Another worker takes the message while the first still works on it.
    [taken] = await client.lease("jobs", { visibilityTimeout: 60 });
    expect(taken!.leaseGeneration).toBe(2);
    gate.resolve();
    await eventually(() => consumer.stats.stale === 1);
    // Which message was done twice, not only how many: the handler outran its lease.
    expect(staleMessages.map((m) => [m.event.id, m.leaseGeneration])).toEqual([["contended", 1]]);
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

  it("close() stops the client's consumers: their waiting polls end at once and done resolves", async () => {
    const { h, client } = await consumeHarness();
    let consumer!: ReturnType<typeof client.consume>;
    await h.whenWaiting(async () => (consumer = client.consume("jobs", () => undefined)).done);
    // The server's clock never moves here: a poll left to run out would hold close() forever.
    await client.close();
    expect(await consumer.done).toEqual({ leased: 0, acked: 0, nacked: 0, stale: 0 });
    const other = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv });
    await other.send("jobs", [{ id: "after-close", source: "/c", type: "t" }]);
    expect((await other.getQueue("jobs")).counts).toMatchObject({ ready: 1, leased: 0 });
    await other.close();
  }, 10_000);

  it("a consumer whose dispatcher is destroyed under it ends, rejecting done, rather than retrying for ever", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const pool = new CountingPool(h.server.url);
    const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv, dispatcher: pool });
    const errors: unknown[] = [];
    let consumer!: ReturnType<typeof client.consume>;
    await h.whenWaiting(async () => (consumer = client.consume("jobs", () => undefined, { retryLeaseAfterMs: 1, onError: (e) => errors.push(e) })).done);
    await pool.destroy();
    const error = await consumer.done.then(
      () => "resolved",
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: "UND_ERR_DESTROYED" });
    expect(pool.requests).toBe(1);
  }, 10_000);

  it("with wait 0, an empty lease is followed by a pause of retryLeaseAfterMs, not another lease at once", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const pool = new CountingPool(h.server.url);
    const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv, dispatcher: pool });
    const consumer = client.consume("jobs", () => undefined, { wait: 0, retryLeaseAfterMs: 60_000 });
    await eventually(() => pool.requests === 1);
    // A loop with no pause calls again within a millisecond; 200 ms gave it hundreds of calls.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(pool.requests).toBe(1);
    await consumer.stop();
    await pool.close();
  });

  it("a lease refused with Retry-After waits what the server said, not retryLeaseAfterMs", async () => {
    // A client that does not read a lease of 100 large messages fills the server's budget of
    // unread answers: leases are refused 503 with Retry-After 1 until it goes.
    const h = await apiHarness({ answerBytesPendingMax: 1_000_000 });
    await h.createQueue("big");
    await h.createQueue("jobs");
    const data = "x".repeat(limits.messageBytesMax - 1_000);
    for (let i = 0; i < 100; i++) {
      expect((await h.call("POST", `${h.queuePath("big")}:send`, { body: { events: [event(`e${i}`, data)] } })).status).toBe(200);
    }
    const unread = await unreadLease(h.server.url, h.defaultKey, "big");
    await eventually(async () => (await h.call("GET", h.queuePath("big"))).json.counts.leased === 100);

    const pool = new CountingPool(h.server.url);
    const client = new QueuesClient({ url: h.server.url, apiKey: h.defaultKey, env: testEnv, dispatcher: pool });
    const clock = new ManualClock();
    const errors: unknown[] = [];
    const consumer = consume(client, "jobs", () => undefined, { retryLeaseAfterMs: 60_000, onError: (e) => errors.push(e) }, clock);
    await eventually(() => errors.length === 1 && clock.pendingTimers() === 1);
    expect(errors[0]).toMatchObject({ status: 503, code: "unavailable", retryAfterSeconds: 1 });
    clock.advance(999);
    expect(clock.pendingTimers()).toBe(1);
    expect(pool.requests).toBe(1);
    unread.destroy();
    await eventually(async () => (await h.call("GET", `${h.queuePath("big")}/dead-letters`)).status === 200);
    // The next lease goes out once the second is up, and is taken: a long poll waits in the queue.
    await h.whenWaiting(async () => clock.advance(1));
    expect(pool.requests).toBe(2);
    await consumer.stop();
    expect(errors).toHaveLength(1);
    await pool.close();
  }, 20_000);

  it("the wait after a refused lease: the server's Retry-After up to a minute, else retryLeaseAfterMs", () => {
    const refused = (status: number, retryAfterSeconds?: number) => new QueuesApiError(status, { code: "x" }, retryAfterSeconds);
    expect(leaseRetryAfterMsMax).toBe(60_000);
    expect(leaseRetryAfterMs(refused(503, 10), 1_000)).toBe(10_000);
    expect(leaseRetryAfterMs(refused(429, 1), 60_000)).toBe(1_000);
    expect(leaseRetryAfterMs(refused(503, 60), 1_000)).toBe(60_000);
    expect(leaseRetryAfterMs(refused(503, 61), 1_000)).toBe(60_000);
    expect(leaseRetryAfterMs(refused(503, 3_600), 1_000)).toBe(60_000);
    // "Now" from a proxy, said every time, would make a loop of calls.
    expect(leaseRetryAfterMs(refused(503, 0), 1_000)).toBe(1_000);
    expect(leaseRetryAfterMs(refused(503), 1_000)).toBe(1_000);
    expect(leaseRetryAfterMs(new QueuesApiError(0, { code: "network_error" }), 250)).toBe(250);
    expect(leaseRetryAfterMs(new Error("anything else"), 250)).toBe(250);
  });

  for (const callback of ["onError", "retryDelay"] as const) {
    it(`a ${callback} that throws still lets the batch settle, then ends the loop with its error`, async () => {
      const { client, counts, send } = await consumeHarness();
      const bug = new Error(`${callback} bug`);
      const throwing = (): never => {
        throw bug;
      };
      const consumer = client.consume(
        "jobs",
        (m) => {
          // Not an Error: whatever a handler throws is reported and nacked.
          if (m.event.id === "bad") throw null;
        },
        callback === "onError" ? { onError: throwing } : { retryDelay: throwing },
      );
      await send("good", "bad");
      expect(await consumer.done.catch((e: unknown) => e)).toBe(bug);
      expect(consumer.stats).toMatchObject({ leased: 2, acked: 1, nacked: 1 });
      expect(await counts()).toMatchObject({ ready: 1, leased: 0 });
      const [again] = await client.lease("jobs");
      expect(again!.event.id).toBe("bad");
      await client.close();
    });
  }

  it("a message is acked when its own handler returns, not when the slowest of its batch does", async () => {
    const { client, counts, send } = await consumeHarness();
    const gate = deferred();
    const consumer = client.consume("jobs", async (m) => {
      if (m.event.id === "slow") await gate.promise;
    });
    await send("fast", "slow");
    // Held back with the slow one, the fast message's ack would come after its lease ran out, and
    // another worker would have done it again.
    await eventually(async () => (await counts()).leased === 1);
    expect(consumer.stats).toMatchObject({ leased: 2, acked: 1 });
    gate.resolve();
    expect(await consumer.stop()).toEqual({ leased: 2, acked: 2, nacked: 0, stale: 0 });
    expect(await counts()).toMatchObject({ ready: 0, leased: 0 });
    await client.close();
  });
});
