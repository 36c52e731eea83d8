/**
 * The queue wiring against the installed Miniflare: the patched plugin has the shape it must
 * have, and a Worker's send() really arrives in a cell through a real workerd. A Miniflare upgrade
 * that breaks the wiring fails here.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Miniflare, PLUGINS } from "miniflare";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { CellRegistry } from "@celld/queue-cell";
import { nodeProducerHandler } from "../../bindings/src/producer-handler.ts";
import {
  checkQueuePluginShape,
  installQueueWiring,
  producerServiceBindingName,
  producerServiceBindings,
  queueProducerWorkerOptions,
} from "../src/queue-transport/miniflare-queue-wiring.ts";
import { installedMiniflareVersion, wiredMiniflareVersion } from "../src/workerd/miniflare-version.ts";
import { ProducerServer, producerRouteHeader } from "../src/queue-transport/producer-server.ts";

describe("the installed miniflare", () => {
  test("is the release the wiring was checked against (re-check the wiring before changing this)", () => {
    expect(installedMiniflareVersion()).toBe(wiredMiniflareVersion);
  });

  test("has the plugin shape the wiring relies on", () => {
    expect(() => checkQueuePluginShape(PLUGINS.queues, PLUGINS.core)).not.toThrow();
  });

  test("a plugin shape the wiring does not know is refused loudly, naming the expected version", () => {
    const version = `miniflare ${wiredMiniflareVersion}`;
    expect(() => checkQueuePluginShape(undefined, PLUGINS.core)).toThrow(version);
    const queues = PLUGINS.queues as unknown as Record<string, unknown>;
    expect(() => checkQueuePluginShape({ ...queues, getServices: undefined }, PLUGINS.core)).toThrow(
      "PLUGINS.queues.getServices is not a function",
    );
    expect(() => checkQueuePluginShape({ ...queues, getBindings: () => [{ name: "P", service: { name: "x" } }] }, PLUGINS.core)).toThrow(
      /no longer returns \[\{ name, queue: \{ name \} \}\]/,
    );
  });
});

describe("the patched queues plugin", () => {
  beforeAll(() => {
    installQueueWiring();
    installQueueWiring();
  });

  test("binds each producer to its external service binding on the same worker", async () => {
    const bindings = await PLUGINS.queues.getBindings({ queueProducers: { JOBS: { queueName: "jobs" }, MAIL: "mail" } }, 3);
    expect(bindings).toEqual([
      { name: "JOBS", queue: { name: `core:builtin:3:#${producerServiceBindingName("JOBS")}` } },
      { name: "MAIL", queue: { name: `core:builtin:3:#${producerServiceBindingName("MAIL")}` } },
    ]);
    expect(await PLUGINS.queues.getBindings({}, 0)).toEqual([]);
  });

  test("runs no broker, and refuses queueConsumers", async () => {
    const services = (options: Record<string, unknown>) =>
      PLUGINS.queues.getServices({ options } as unknown as Parameters<typeof PLUGINS.queues.getServices>[0]);
    expect(await services({ queueProducers: { JOBS: { queueName: "jobs" } } })).toEqual([]);
    expect(() => services({ queueConsumers: ["jobs"] })).toThrow("do not pass queueConsumers to Miniflare");
  });

  test("service bindings: one per producer, each its own route, never over the worker's own or twice", async () => {
    const factory = () => async () => undefined;
    const server = await ProducerServer.start();
    try {
      const bindings = producerServiceBindings([{ binding: "A", queue: "a" }, { binding: "B", queue: "b" }], factory, server);
      expect(Object.keys(bindings)).toEqual(["__celld_queue_A", "__celld_queue_B"]);
      const routes = Object.values(bindings).map((b) => b.external.http.injectRequestHeaders);
      expect(routes.map((r) => r[0]!.name)).toEqual([producerRouteHeader, producerRouteHeader]);
      expect(new Set(routes.map((r) => r[0]!.value)).size).toBe(2);
      expect(Object.values(bindings).map((b) => b.external.address)).toEqual([server.address, server.address]);
      expect(() => producerServiceBindings([{ binding: "A", queue: "a" }, { binding: "A", queue: "b" }], factory, server)).toThrow(
        'queue producer binding "A" is declared twice',
      );
      expect(() => producerServiceBindings([{ binding: "A", queue: "a" }], factory, server, { __celld_queue_A: "mine" })).toThrow(
        'service binding "__celld_queue_A" is reserved for queue producer "A"',
      );
    } finally {
      await server.close();
    }
  });

  test("the producer server answers a request with no known route 404, naming it", async () => {
    const server = await ProducerServer.start();
    try {
      const unknown = await postTo(server, "/message", { [producerRouteHeader]: "9:X" });
      expect(unknown.status).toBe(404);
      expect(unknown.text).toContain('"9:X"');
      expect((await postTo(server, "/message", {})).status).toBe(404);
    } finally {
      await server.close();
    }
  });

  test("the producer server listens on a Unix socket only this user can reach, removed on close", async () => {
    const server = await ProducerServer.start();
    const { socketPath } = server.listening as { socketPath: string };
    expect(server.address).toBe(`unix:${socketPath}`);
    expect(statSync(dirname(socketPath)).mode & 0o777).toBe(0o700);
    expect(statSync(socketPath).isSocket()).toBe(true);
    await server.close();
    expect(existsSync(dirname(socketPath))).toBe(false);
  });

  test("in a given directory (a host's <data>/run), a socket left by a crash is replaced, and close removes only the socket", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "celld-wiring-")), "run");
    try {
      const crashed = await ProducerServer.start({ socketDir: dir });
      // What a kill -9 leaves: the socket file, with nobody listening on it.
      const left = (crashed.listening as { socketPath: string }).socketPath;
      const again = await ProducerServer.start({ socketDir: dir }).catch((e: unknown) => e);
      expect(again).toBeInstanceOf(ProducerServer);
      const server = again as ProducerServer;
      expect(server.listening).toEqual({ socketPath: left });
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect((await postTo(server, "/message", {})).status).toBe(404);
      await server.close();
      expect(existsSync(left)).toBe(false);
      expect(existsSync(dir)).toBe(true);
      await crashed.close().catch(() => undefined);
    } finally {
      rmSync(dirname(dir), { recursive: true, force: true });
    }
  });

  test("the producer server can listen on loopback TCP instead", async () => {
    const server = await ProducerServer.start({ transport: "tcp" });
    try {
      expect(server.listening).toMatchObject({ host: "127.0.0.1" });
      expect(server.address).toMatch(/^127\.0\.0\.1:\d+$/);
      expect((await postTo(server, "/message", {})).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});

/** One POST to the producer server, wherever it listens. */
function postTo(server: ProducerServer, path: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const where = server.listening;
  return new Promise((resolve, reject) => {
    const req = httpRequest({ ...where, path, method: "POST", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("a Worker's send() through real workerd", () => {
  let dir: string;
  let registry: CellRegistry;
  let mf: Miniflare;
  let server: ProducerServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "celld-wiring-"));
    registry = new CellRegistry({ dataDir: dir, durability: "normal" });
    server = await ProducerServer.start();
    const wiring = queueProducerWorkerOptions(
      [{ binding: "JOBS", queue: "wiring-jobs" }],
      (producer) => nodeProducerHandler({ queue: producer.queue, getCell: () => registry.open(producer.queue) }),
      server,
    );
    mf = new Miniflare({
      cf: false,
      workers: [
        {
          name: "producer",
          modules: true,
          compatibilityDate: "2026-04-26",
          script: `export default {
            async fetch(request, env) {
              const sent = await env.JOBS.send("hello from workerd", { contentType: "text" });
              const v8 = await env.JOBS.send({ at: new Date(0) }, { contentType: "v8" });
              return Response.json({ sent, v8, keys: Object.keys(env).sort() });
            },
          };`,
          ...wiring,
        },
      ],
    });
  });

  afterAll(async () => {
    await mf?.dispose();
    await server?.close();
    await registry?.closeAll();
    rmSync(dir, { recursive: true, force: true });
  });

  test("arrives in the queue's cell with its bytes and content type", async () => {
    const response = await mf.dispatchFetch("http://worker/");
    expect(response.status).toBe(200);
    const result = (await response.json()) as { sent: { metadata: { metrics: { backlogCount: number } } }; keys: string[] };
    expect(result.sent.metadata.metrics.backlogCount).toBe(1);
    // The producer's service binding is an ordinary binding, so a Worker can see it.
    expect(result.keys).toEqual(["JOBS", "__celld_queue_JOBS"]);

    const leased = await (await registry.open("wiring-jobs")).lease({ max: 10 });
    expect(leased.map((m) => m.contentType)).toEqual(["text", "v8"]);
    expect(Buffer.from(leased[0]!.body).toString("utf8")).toBe("hello from workerd");
    // workerd's structured clone: version header 0xFF 0x0F, then the object.
    expect([...leased[1]!.body.subarray(0, 2)]).toEqual([0xff, 0x0f]);
  });
});
