import { createServer as createHttpServer, request, type Server as HttpServer } from "node:http";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "@celld/queue-cell";
import { ConnectionGuard } from "../src/front/connection-guard.ts";
import { startFront, type Front } from "../src/front/front-server.ts";
import { WorkerRouter } from "../src/front/worker-router.ts";

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function listen<T extends Server>(server: T): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

async function open(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  cleanups.push(() => socket.destroy());
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  return socket;
}

const closed = (socket: Socket): Promise<void> =>
  new Promise((resolve) => (socket.destroyed && socket.readyState === "closed" ? resolve() : socket.once("close", () => resolve())));

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(check()).toBe(true);
}

/** Echo server whose guard the test drives with a manual clock. */
async function guarded(max: number, idleMs: number, report?: (line: string) => void) {
  const clock = new ManualClock(1_000_000);
  const server = createServer((socket) => socket.on("data", (d) => socket.write(d)));
  const guard = new ConnectionGuard(server, { name: "--port", max, idleMs, clock, report, reportWindowMs: 60_000 });
  const port = await listen(server);
  return { clock, guard, port };
}

describe("ConnectionGuard", () => {
  it("closes a connection that sends nothing within the idle timeout, and keeps one that spoke", async () => {
    const { clock, guard, port } = await guarded(10, 5_000);
    const silent = await open(port);
    const talker = await open(port);
    talker.write("hi");
    await new Promise((resolve) => talker.once("data", resolve));
    await until(() => guard.stats.open === 2);
    clock.advance(4_999);
    expect(guard.sweep()).toBe(0);
    clock.advance(1);
    expect(guard.sweep()).toBe(1);
    await closed(silent);
    expect(talker.destroyed).toBe(false);
    expect(guard.stats).toMatchObject({ open: 1, idleClosed: 1, refused: 0, evicted: 0 });
  });

  it("at its maximum, makes room by closing the silent connection open longest", async () => {
    const { guard, port } = await guarded(2, 60_000);
    const oldest = await open(port);
    await until(() => guard.stats.open === 1);
    const next = await open(port);
    await until(() => guard.stats.open === 2);
    const newest = await open(port);
    await closed(oldest);
    await until(() => guard.stats.accepted === 3);
    expect(guard.stats).toMatchObject({ open: 2, evicted: 1, refused: 0 });
    expect(next.destroyed).toBe(false);
    newest.write("x");
    await new Promise((resolve) => newest.once("data", resolve));
  });

  it("refuses a newcomer when every open connection has spoken, and reports once a window", async () => {
    const lines: string[] = [];
    const { clock, guard, port } = await guarded(1, 60_000, (line) => lines.push(line));
    const talker = await open(port);
    talker.write("x");
    await new Promise((resolve) => talker.once("data", resolve));
    const refused = [await open(port), await open(port), await open(port)];
    await Promise.all(refused.map(closed));
    await until(() => guard.stats.refused === 3);
    expect(talker.destroyed).toBe(false);
    // The first refusal is said at once; the next two wait for the window to end, then come as one line.
    expect(lines).toEqual(["--port: refused 1 new connection(s) at its maximum of 1 open (a flood, or a limit too low: see docs/limits.md#connections)"]);
    clock.advance(60_000);
    expect(lines[1]).toBe("--port: refused 2 new connection(s) at its maximum of 1 open (a flood, or a limit too low: see docs/limits.md#connections)");
    expect(lines).toHaveLength(2);
  });

  it("refuses a maximum below 1, naming the port", () => {
    expect(() => new ConnectionGuard(createServer(), { name: "--api-port", max: 0, idleMs: 1 })).toThrow(
      "--api-port: the connection maximum must be a whole number from 1, got 0",
    );
  });
});

describe("front server", () => {
  /** A stand-in for a Worker's workerd socket: answers with what it received. */
  async function upstream(name: string): Promise<{ host: string; port: number; server: HttpServer }> {
    const server = createHttpServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        res.writeHead(200, ["Content-Type", "application/json", "Set-Cookie", "a=1", "Set-Cookie", "b=2"]);
        res.end(JSON.stringify({ worker: name, url: req.url, host: req.headers.host, raw: req.rawHeaders, body }));
      });
    });
    server.on("upgrade", (req, socket) => {
      socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n");
      socket.on("data", (d) => socket.write(`${name}:${d}`)).on("end", () => socket.end());
    });
    const port = await listen(server);
    return { host: "127.0.0.1", port, server };
  }

  async function front(connectionsMax = 100): Promise<Front> {
    const [a, b] = [await upstream("a"), await upstream("b")];
    const router = new WorkerRouter({ workers: [{ name: "a", routes: [] }, { name: "b", routes: [{ pattern: "b.test/*", customDomain: false }] }] });
    const f = await startFront({ host: "127.0.0.1", port: 0, router, upstreams: new Map([["a", a], ["b", b]]), connectionsMax, warn: () => undefined });
    cleanups.push(() => f.close());
    return f;
  }

  function get(f: Front, host: string, path = "/", body?: string): Promise<{ status: number; headers: Record<string, unknown>; raw: string[]; json: any }> {
    return new Promise((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: Number(f.url.port), path, method: body === undefined ? "GET" : "POST", headers: { host, "x-twice": ["1", "2"] }, agent: false }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, raw: res.rawHeaders, json: text.startsWith("{") ? JSON.parse(text) : text }));
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  it("routes by Host and by route, keeping the Host, repeated headers and the body", async () => {
    const f = await front();
    const byName = await get(f, `b.localhost:${f.url.port}`, "/x?y=1", "hello");
    expect(byName.json).toMatchObject({ worker: "b", url: "/x?y=1", host: `b.localhost:${f.url.port}`, body: "hello" });
    expect(byName.json.raw.filter((v: string) => v === "1" || v === "2")).toEqual(["1", "2"]);
    expect(byName.raw.filter((v: string) => v.startsWith("a=") || v.startsWith("b="))).toEqual(["a=1", "b=2"]);
    expect((await get(f, "b.test", "/q")).json.worker).toBe("b");
    expect((await get(f, "localhost", "/")).json.worker).toBe("a");
    expect(f.stats.requests).toMatchObject({ "worker-host": 1, route: 1, "first-worker": 1 });
  });

  it("tells the Worker the client's address as CF-Connecting-IP, unless a proxy in front already did", async () => {
    const f = await front();
    const direct = (await get(f, "localhost")).json.raw as string[];
    expect(direct[direct.indexOf("CF-Connecting-IP") + 1]).toBe("127.0.0.1");
    const viaProxy = await new Promise<string[]>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: Number(f.url.port), path: "/", headers: { host: "localhost", "cf-connecting-ip": "203.0.113.7" }, agent: false }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve(JSON.parse(text).raw));
      });
      req.on("error", reject);
      req.end();
    });
    const named = viaProxy.filter((v, i) => i % 2 === 0 && v.toLowerCase() === "cf-connecting-ip");
    expect(named).toHaveLength(1);
    expect(viaProxy[viaProxy.findIndex((v) => v.toLowerCase() === "cf-connecting-ip") + 1]).toBe("203.0.113.7");
  });

  it("joins an upgraded connection to the Worker's", async () => {
    const f = await front();
    const socket = await open(Number(f.url.port));
    socket.write("GET /ws HTTP/1.1\r\nHost: b.localhost\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n");
    let seen = "";
    socket.on("data", (d) => (seen += d));
    await until(() => seen.includes("\r\n\r\n"));
    expect(seen).toMatch(/^HTTP\/1.1 101 /);
    socket.write("ping");
    await until(() => seen.endsWith("b:ping"));
  });

  it("answers 502 when the Worker's socket is gone, and 503 while no socket is known", async () => {
    const f = await front();
    f.setUpstreams(new Map([["a", { host: "127.0.0.1", port: 1 }]]));
    const gone = await get(f, "localhost");
    expect(gone.status).toBe(502);
    expect(gone.json).toMatch(/^celld: the Worker "a" could not be reached \(ECONNREFUSED\)/);
    const unknown = await get(f, "b.localhost");
    expect(unknown.status).toBe(503);
    expect(unknown.headers["retry-after"]).toBe("1");
    expect(f.stats.unreachable).toBe(2);
  });

  it("holds its clients to the maximum: a silent flood makes room, a request still gets through", async () => {
    const f = await front(5);
    const flood = await Promise.all(Array.from({ length: 20 }, () => open(Number(f.url.port))));
    await until(() => f.stats.connections.accepted === 20);
    expect(f.stats.connections.open).toBe(5);
    expect((await get(f, "a.localhost")).json.worker).toBe("a");
    expect(f.stats.connections.evicted).toBeGreaterThanOrEqual(16);
    await Promise.all(flood.slice(0, 15).map(closed));
  });

  it("sends a bodiless request again when its pooled connection was dropped by workerd; a request with a body gets 502", async () => {
    // workerd's stand-in drops a connection instead of answering its second request.
    const served = new WeakMap<object, number>();
    const server = createHttpServer((req, res) => {
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (n === 2) return req.socket.destroy();
      req.resume();
      req.on("end", () => res.end(`ok ${req.method}`));
    });
    const port = await listen(server);
    const router = new WorkerRouter({ workers: [{ name: "a", routes: [] }] });
    const f = await startFront({ host: "127.0.0.1", port: 0, router, upstreams: new Map([["a", { host: "127.0.0.1", port }]]), connectionsMax: 10, warn: () => undefined });
    cleanups.push(() => f.close());
    expect((await get(f, "a.localhost")).json).toBe("ok GET");
    expect(await get(f, "a.localhost")).toMatchObject({ status: 200, json: "ok GET" });
    // The retry's connection is dropped at its second request too, which now carries a body.
    const refused = await get(f, "a.localhost", "/", "body");
    expect(refused.status).toBe(502);
    expect(refused.json).toMatch(/^celld: the Worker "a" could not be reached \(ECONNRESET\)/);
    expect(await get(f, "a.localhost", "/", "x")).toMatchObject({ status: 200, json: "ok POST" });
  });
});
