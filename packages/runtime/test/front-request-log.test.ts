import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, it, onTestFinished } from "vitest";
import { startFront, type FrontRequest } from "../src/front/front-server.ts";
import { WorkerRouter } from "../src/front/worker-router.ts";

it("tells each answered request with its Worker, for --log-requests", async () => {
  const upstream = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(req.url === "/missing" ? 404 : 202, { "content-type": "text/plain" });
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const told: FrontRequest[] = [];
  const router = new WorkerRouter({ workers: [{ name: "app", routes: [] }, { name: "images", routes: [{ pattern: "img.test/*", customDomain: false }] }] });
  const port = (upstream.address() as AddressInfo).port;
  const front = await startFront({
    host: "127.0.0.1",
    port: 0,
    router,
    upstreams: new Map([["app", { host: "127.0.0.1", port }], ["images", { host: "127.0.0.1", port }]]),
    connectionsMax: 10,
    warn: () => undefined,
    onAnswered: (r) => told.push(r),
  });
  onTestFinished(async () => {
    await front.close();
    await new Promise((resolve) => upstream.close(resolve));
  });
  const get = (host: string, path: string) =>
    new Promise<number>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: Number(front.url.port), path, headers: { host }, agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode!));
      });
      req.on("error", reject);
      req.end();
    });
  expect(await get("localhost", "/jobs?x=1")).toBe(202);
  expect(await get("img.test", "/missing")).toBe(404);
  await expect.poll(() => told.length).toBe(2);
  expect(told.map(({ durationMs, ...rest }) => (expect(durationMs).toBeGreaterThanOrEqual(0), rest))).toEqual([
    { method: "GET", url: "/jobs?x=1", status: 202, worker: "app" },
    { method: "GET", url: "/missing", status: 404, worker: "images" },
  ]);
});
