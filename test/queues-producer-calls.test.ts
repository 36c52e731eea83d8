import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Cell } from "@celld/queue-cell";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { project, runHost, type RunningHost } from "./host-harness.ts";

// The producer calls a Worker author makes, through workerd's real Queue binding, checked against
// what the queue then holds. The queues here have no consumer, so nothing moves on its own.

const fixture = readFileSync(join(import.meta.dirname, "fixtures", "odd-handlers-worker.js"), "utf8");
const text = new TextDecoder();

interface Metrics {
  backlogCount: number;
  backlogBytes: number;
  oldestMessageTimestamp?: string;
}

describe("a Worker's send(), sendBatch() and metrics()", () => {
  const p = project();
  let h: RunningHost;
  let jobs: Cell;

  beforeAll(async () => {
    const config = p.write({
      "wrangler.toml": `
name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
`,
      "worker.js": fixture,
    });
    h = await runHost([config], p.dataDir);
    jobs = await h.cell("jobs");
  });

  afterAll(async () => {
    await h?.close();
    p.remove();
  });

  beforeEach(async () => {
    await jobs.purge("all");
  });

  async function call(path: string, payload: Record<string, unknown> = {}): Promise<{ status: number; json: unknown }> {
    const res = await h.fetch(path, { method: "POST", body: JSON.stringify(payload) });
    return { status: res.status, json: await res.json() };
  }

  /** Everything the queue holds, delayed included, as [contentType, body text]. */
  async function held(): Promise<Array<[string, string]>> {
    h.clock.advance(86_400_000);
    const leased = await jobs.lease({ max: 100 });
    await jobs.release(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
    return leased.map((m) => [m.contentType, text.decode(m.body)]);
  }

  test("send() reads contentType in any case", async () => {
    expect((await call("/send", { body: { a: 1 }, options: { contentType: "JSON" } })).status).toBe(200);
    expect((await call("/send", { body: "t", options: { contentType: "Text" } })).status).toBe(200);
    expect(await held()).toEqual([
      ["json", '{"a":1}'],
      ["text", "t"],
    ]);
  });

  test("sendBatch() refuses a contentType that is not lower case: workerd's own check, as on Cloudflare", async () => {
    // workerd validates the lower-cased name but then encodes by the name as given, which matches
    // none; send() encodes by the validated one.
    for (const contentType of ["Text", "JSON"]) {
      expect(await call("/send-batch", { messages: [{ body: "s", contentType }] })).toEqual({
        status: 500,
        json: { error: `TypeError: Unsupported queue message content type: ${contentType}` },
      });
    }
    expect(await jobs.counts()).toMatchObject({ ready: 0, delayed: 0 });
  });

  test("sendBatch() takes any iterable: a Set and a generator", async () => {
    for (const iterable of ["set", "generator"]) {
      const res = await call("/send-batch", { messages: [{ body: 1 }, { body: 2 }], iterable });
      expect(res.status).toBe(200);
    }
    expect((await held()).map(([, body]) => body)).toEqual(["1", "2", "1", "2"]);
  });

  test("a sendBatch() message's delaySeconds is read at its top level; a nested options is ignored, as workerd does", async () => {
    await call("/send-batch", { messages: [{ body: "nested", contentType: "text", options: { delaySeconds: 100 } }] });
    await call("/send-batch", { messages: [{ body: "top", contentType: "text", delaySeconds: 100 }] });
    expect(await jobs.counts()).toMatchObject({ ready: 1, delayed: 1 });
  });

  test("an undefined body and an empty batch are refused by workerd; nothing is stored", async () => {
    expect(await call("/send-undefined")).toEqual({ status: 500, json: { error: "TypeError: Message body cannot be undefined" } });
    expect(await call("/send-batch", { messages: [] })).toEqual({
      status: 500,
      json: { error: "TypeError: sendBatch() requires at least one message" },
    });
    expect(await jobs.counts()).toMatchObject({ ready: 0, delayed: 0 });
  });

  test("send() returns the backlog after it, and metrics() reads the same; an empty queue has no oldest timestamp", async () => {
    expect(await call("/metrics")).toEqual({ status: 200, json: { backlogCount: 0, backlogBytes: 0 } });
    const first = (await call("/send", { body: "abc", options: { contentType: "text" } })).json as { metadata: { metrics: Metrics } };
    const second = (await call("/send", { body: "de", options: { contentType: "text", delaySeconds: 60 } })).json as {
      metadata: { metrics: Metrics };
    };
    const counts = await jobs.counts();
    const oldest = new Date(counts.oldestMessageAt!).toISOString();
    expect(first.metadata.metrics).toEqual({ backlogCount: 1, backlogBytes: 3, oldestMessageTimestamp: oldest });
    // A delayed message is in the backlog too.
    expect(second.metadata.metrics).toEqual({ backlogCount: 2, backlogBytes: 5, oldestMessageTimestamp: oldest });
    expect(await call("/metrics")).toEqual({ status: 200, json: second.metadata.metrics });
    expect(counts).toMatchObject({ ready: 1, delayed: 1, backlogBytes: 5 });
  });

  // JSON.stringify gives undefined for these, and workerd then sends the text "undefined" as a
  // json body. Stored, the consumer would get the string "undefined" (celld hands over a json body
  // that does not parse as its text); Cloudflare's own consumer would fail to parse it on every
  // delivery. Refused at send, the author learns of it where the mistake is.
  for (const kind of ["function", "symbol", "toJSON"]) {
    for (const batch of [false, true]) {
      test(`${batch ? "sendBatch()" : "send()"} of a value JSON cannot represent (${kind}) as json is refused; nothing is stored`, async () => {
        const res = await call("/send-not-json", { body: { kind, batch } });
        const field = batch ? "messages[1]" : "message";
        expect(res).toEqual({
          status: 500,
          json: {
            error:
              `Error: MessageMetadataInvalid: ${field} has contentType json but its body is not JSON: ` +
              "JSON.stringify() gave undefined (a function, a Symbol, or a toJSON() that returns undefined); " +
              "send a value JSON can represent (10203)",
          },
        });
        expect(await jobs.counts()).toMatchObject({ ready: 0, delayed: 0 });
      });
    }
  }
});
