import { ManualClock } from "@celld/queue-cell";
import { describe, expect, it } from "vitest";
import { startFront } from "../src/front/front-server.ts";
import { RequestHold } from "../src/front/request-hold.ts";
import { WorkerRouter } from "../src/front/worker-router.ts";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

describe("RequestHold (celld serve's swap)", () => {
  it("runs at once when not holding; holds in order until released", () => {
    const hold = new RequestHold(new ManualClock(), { heldMax: 10, heldMsMax: 1_000 });
    const ran: number[] = [];
    hold.admit(() => ran.push(1), () => ran.push(-1));
    hold.hold();
    hold.admit(() => ran.push(2), () => ran.push(-2));
    hold.admit(() => ran.push(3), () => ran.push(-3));
    expect(ran).toEqual([1]);
    expect(hold.waiting).toBe(2);
    hold.release();
    expect(ran).toEqual([1, 2, 3]);
    expect(hold.heldTotal).toBe(2);
  });

  it("refuses past heldMax at once, and a request held longer than heldMsMax then", () => {
    const clock = new ManualClock();
    const hold = new RequestHold(clock, { heldMax: 2, heldMsMax: 1_000 });
    const seen: string[] = [];
    hold.hold();
    hold.admit(() => seen.push("run a"), () => seen.push("refused a"));
    clock.advance(500);
    hold.admit(() => seen.push("run b"), () => seen.push("refused b"));
    hold.admit(() => seen.push("run c"), () => seen.push("refused c"));
    expect(seen).toEqual(["refused c"]);
    clock.advance(499);
    expect(seen).toEqual(["refused c"]);
    clock.advance(1);
    expect(seen).toEqual(["refused c", "refused a"]);
    hold.release();
    expect(seen).toEqual(["refused c", "refused a", "run b"]);
    clock.advance(10_000);
    expect(seen).toHaveLength(3);
    expect(hold.refusedTotal).toBe(2);
  });

  it("drained() waits for every forwarded request", async () => {
    const hold = new RequestHold(new ManualClock());
    await hold.drained();
    const first = hold.forwarded();
    const second = hold.forwarded();
    let drained = false;
    void hold.drained().then(() => (drained = true));
    first();
    first(); // told twice: counted once
    await new Promise((resolve) => setImmediate(resolve));
    expect(drained).toBe(false);
    second();
    await new Promise((resolve) => setImmediate(resolve));
    expect(drained).toBe(true);
  });
});

describe("the front door holds requests for a swap", () => {
  it("answers held requests from the upstream set before release; requests in flight finish where they went", async () => {
    const answering = (name: string, delayMs = 0) =>
      new Promise<{ close(): void; port: number }>((resolve) => {
        const server = createServer((_req, res) => setTimeout(() => res.end(name), delayMs));
        server.listen(0, "127.0.0.1", () => resolve({ close: () => server.close(), port: (server.address() as AddressInfo).port }));
      });
    const old = await answering("old", 200);
    const next = await answering("new");
    const front = await startFront({
      host: "127.0.0.1",
      port: 0,
      router: new WorkerRouter({ workers: [{ name: "w", routes: [] }] }),
      upstreams: new Map([["w", { host: "127.0.0.1", port: old.port }]]),
      connectionsMax: 100,
      warn: () => undefined,
    });
    try {
      const inFlight = fetch(front.url).then((r) => r.text());
      await new Promise((resolve) => setTimeout(resolve, 50));
      front.holdRequests();
      const held = fetch(front.url).then((r) => r.text());
      let drained = false;
      const done = front.requestsDone().then(() => (drained = true));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(drained).toBe(false);
      expect(await inFlight).toBe("old");
      await done;
      front.setUpstreams(new Map([["w", { host: "127.0.0.1", port: next.port }]]));
      front.releaseRequests();
      expect(await held).toBe("new");
      expect(front.stats.held).toMatchObject({ total: 1, refused: 0 });
    } finally {
      await front.close();
      old.close();
      next.close();
    }
  });
});

describe("RequestHold with forwardingMax", () => {
  it("lets that many be forwarded at once; the rest wait in order, and a hold stops them too", () => {
    const hold = new RequestHold(new ManualClock(), { heldMax: 10, heldMsMax: 1_000, forwardingMax: 2 });
    const ran: number[] = [];
    const done = new Map<number, () => void>();
    const admit = (i: number) => hold.admit(() => {
      ran.push(i);
      done.set(i, hold.forwarded());
    }, () => ran.push(-i));
    for (const i of [1, 2, 3, 4]) admit(i);
    expect(ran).toEqual([1, 2]);
    done.get(1)!();
    expect(ran).toEqual([1, 2, 3]);
    hold.hold();
    done.get(2)!();
    expect(ran).toEqual([1, 2, 3]);
    hold.release();
    expect(ran).toEqual([1, 2, 3, 4]);
    expect(hold.forwarding).toBe(2);
  });
});
