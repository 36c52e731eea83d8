import { describe, expect, it } from "vitest";
import { limits } from "@celld/queue-cell";
import { MetricsEndpoint } from "../src/metrics/metrics-endpoint.ts";
import { metricsHarness, promtoolCheck, sample } from "./metrics-harness.ts";

const prod = "orgs/acme/projects/shop/envs/prod";
const staging = "orgs/acme/projects/shop/envs/staging";
type Leased = { id: string; lease_generation: number };

function event(id: string): Record<string, unknown> {
  return { specversion: "1.0", id, source: "/tests", type: "test.event", data: { n: id } };
}

const refsOf = (messages: readonly Leased[]) => ({ messages: messages.map((m) => ({ id: m.id, lease_generation: m.lease_generation })) });

describe("GET /metrics", () => {
  it("asks for a key with metrics:read, unless public", async () => {
    const h = await metricsHarness();
    expect((await h.call("GET", "/metrics")).status).toBe(401);
    const noScope = await h.call("GET", "/metrics", { key: h.key(prod, ["events:read", "events:write"]) });
    expect(noScope.status).toBe(403);
    expect(JSON.parse(noScope.text).error).toMatchObject({ code: "permission_denied", required_scope: "metrics:read" });
    const ok = await h.call("GET", "/metrics", { key: h.key(prod, ["metrics:read"]) });
    expect(ok.status).toBe(200);
    expect(ok.type).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect((await h.call("POST", "/metrics", { key: h.key(prod, ["metrics:read"]) })).status).toBe(405);

    const open = await metricsHarness({ public: true });
    expect((await open.call("GET", "/metrics")).status).toBe(200);
  });

  it("counts a known workload exactly, per queue, and passes promtool check metrics", async () => {
    const h = await metricsHarness();
    const admin = h.key(prod, ["events:publish", "events:write", "events:read"]);
    const other = h.key(staging, ["events:publish", "events:write", "events:read"]);
    const jobs = `/v1/${prod}/queues/jobs`;
    expect((await h.call("POST", `/v1/${prod}/queues`, { key: admin, body: { name: "jobs", max_deliveries: 2 } })).status).toBe(201);
    expect((await h.call("POST", `/v1/${staging}/queues`, { key: other, body: { name: "jobs" } })).status).toBe(201);

    // 5 sent in 2 calls; 5 delivered, 3 acked, 2 retried; both delivered again (7), one nacked on
    // its last delivery (dead-lettered), the other acked after an ack of its first lease was
    // refused as stale; the dead letter replayed. 1 sent in the other environment.
    await h.call("POST", `${jobs}:send`, { key: admin, body: { events: [event("a"), event("b"), event("c")] } });
    await h.call("POST", `${jobs}:send`, { key: admin, body: { events: [event("d"), event("e")] } });
    const first = JSON.parse((await h.call("POST", `${jobs}:lease`, { key: admin, body: { max_messages: 10 } })).text).messages as Leased[];
    expect(first).toHaveLength(5);
    await h.call("POST", `${jobs}:ack`, { key: admin, body: refsOf(first.slice(0, 3)) });
    await h.call("POST", `${jobs}:nack`, { key: admin, body: refsOf(first.slice(3)) });
    h.clock.advance(1);
    const second = JSON.parse((await h.call("POST", `${jobs}:lease`, { key: admin, body: { max_messages: 10 } })).text).messages as Leased[];
    expect(second).toHaveLength(2);
    await h.call("POST", `${jobs}:nack`, { key: admin, body: refsOf([second[0]!]) });
    const stale = first.find((m) => m.id === second[1]!.id)!;
    await h.call("POST", `${jobs}:ack`, { key: admin, body: refsOf([stale]) });
    await h.call("POST", `${jobs}:ack`, { key: admin, body: refsOf([second[1]!]) });
    h.clock.advance(1);
    expect((await h.call("POST", `${jobs}:replay`, { key: admin, body: {} })).status).toBe(200);
    await h.call("POST", `/v1/${staging}/queues/jobs:send`, { key: other, body: { events: [event("s")] } });
    // A send the cell refuses, as a Worker's too-large send() is.
    const cell = await h.registry.open(`${prod}/queues/jobs`);
    await expect(cell.send([{ body: new Uint8Array(limits.messageBytesMax + 1), contentType: "bytes" }])).rejects.toThrow();
    h.clock.advance(30_000);

    const scraped = await h.call("GET", "/metrics", { key: h.key(prod, ["metrics:read"]) });
    const text = scraped.text;
    const q = { environment: prod, queue: "jobs" };
    expect({
      sent: sample(text, "celld_queue_messages_sent_total", q),
      delivered: sample(text, "celld_queue_messages_delivered_total", q),
      acked: sample(text, "celld_queue_messages_acked_total", q),
      retried: sample(text, "celld_queue_messages_retried_total", q),
      deadLettered: sample(text, "celld_queue_messages_dead_lettered_total", q),
      stale: sample(text, "celld_queue_stale_acks_refused_total", q),
      replayed: sample(text, "celld_queue_messages_replayed_total", q),
      refused: sample(text, "celld_queue_sends_refused_total", { ...q, code: "ERR_MESSAGE_TOO_LARGE" }),
      sendCommits: sample(text, "celld_queue_send_commit_seconds_count", q),
      backlog: sample(text, "celld_queue_backlog_messages", q),
      ready: sample(text, "celld_queue_messages", { ...q, state: "ready" }),
      inFlight: sample(text, "celld_queue_messages", { ...q, state: "in_flight" }),
      dead: sample(text, "celld_queue_messages", { ...q, state: "dead_lettered" }),
      oldestAge: sample(text, "celld_queue_oldest_message_age_seconds", q),
      paused: sample(text, "celld_queue_delivery_paused", q),
    }).toEqual({
      sent: 5,
      delivered: 7,
      acked: 4,
      retried: 2,
      deadLettered: 1,
      stale: 1,
      replayed: 1,
      refused: 1,
      sendCommits: 2,
      backlog: 1,
      ready: 1,
      inFlight: 0,
      dead: 0,
      oldestAge: 30.002,
      paused: 0,
    });
    // The key's environment only; the host's own series are there.
    expect(sample(text, "celld_queue_messages_sent_total", { environment: staging })).toBeUndefined();
    expect(sample(text, "celld_open_cells")).toBe(2);
    expect(sample(text, "celld_fsync_seconds_count")).toBeGreaterThan(0);
    expect(sample(text, "process_resident_memory_bytes")).toBeGreaterThan(0);
    expect(sample(text, "nodejs_eventloop_lag_seconds")).toBeGreaterThanOrEqual(0);
    expect(sample(text, "celld_connections_open", { port: "api" })).toBeGreaterThanOrEqual(1);
    expect(sample(text, "celld_connections_refused_total", { port: "api" })).toBe(0);
    expect(sample(text, "celld_connections_closed_total", { port: "api", reason: "idle" })).toBe(0);

    const check = promtoolCheck(text);
    expect(check.output).toBe("");
    expect(check.status).toBe(0);

    await cell.configure({ deliveryPaused: true });
    const paused = (await h.call("GET", "/metrics", { key: h.key(prod, ["metrics:read"]) })).text;
    expect(sample(paused, "celld_queue_delivery_paused", q)).toBe(1);

    const everyone = await metricsHarness({ public: true });
    expect(sample((await everyone.call("GET", "/metrics")).text, "celld_open_cells")).toBe(0);
  });

  it("answers OpenMetrics when asked, and the Prometheus format again afterwards", async () => {
    const h = await metricsHarness({ public: true });
    const om = await h.call("GET", "/metrics", { accept: "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5" });
    expect(om.type).toBe("application/openmetrics-text; version=1.0.0; charset=utf-8");
    expect(om.text.endsWith("# EOF\n")).toBe(true);
    expect(om.text).toContain("# TYPE celld_queue_messages_sent counter");
    const text = (await h.call("GET", "/metrics")).text;
    expect(text).toContain("# TYPE celld_queue_messages_sent_total counter");
    expect(promtoolCheck(text)).toEqual({ status: 0, output: "" });
  });

  it("serves again from a second endpoint on the same metrics, as after a --watch restart", async () => {
    const h = await metricsHarness({ public: true });
    await h.call("POST", `/v1/${prod}/queues`, { key: h.key(prod, ["events:write"]), body: { name: "jobs" } });
    const again = new MetricsEndpoint({ metrics: h.metrics, registry: h.registry, public: true });
    const text = (await again.scrape(false)).body;
    expect(sample(text, "celld_queue_backlog_messages", { environment: prod, queue: "jobs" })).toBe(0);
    expect(promtoolCheck(text)).toEqual({ status: 0, output: "" });
  });
});
