import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { expect, test } from "vitest";
import { run, waitFor } from "./cli-harness.ts";
import { tidyAfterEach } from "./host-harness.ts";

const { project } = tidyAfterEach();

/** A non-loopback IPv4 address of this machine, if it has one. */
function outsideAddress(): string | undefined {
  return Object.values(networkInterfaces())
    .flat()
    .find((a) => a !== undefined && a.family === "IPv4" && !a.internal)?.address;
}

function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

test("--host 0.0.0.0 exposes the Workers, not the queues API, which stays on 127.0.0.1 unless --api-host says", { timeout: 120_000 }, async () => {
  const p = project();
  p.write({
    "wrangler.toml": 'name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n',
    "worker.js": 'export default { fetch() { return new Response("hi"); } };',
  });
  const r = run(["dev", "--host", "0.0.0.0", "--port", "0", "--api-port", "0"], p.dir);
  try {
    const [, workersPort] = await waitFor(r, /Worker "app" listening on http:\/\/[^:]+:(\d+)/, 60_000);
    const [, apiHost, apiPort] = await waitFor(r, /queues API listening on http:\/\/([^:]+):(\d+)\/v1/, 60_000);
    expect(apiHost).toBe("127.0.0.1");
    expect(await connects("127.0.0.1", Number(apiPort))).toBe(true);
    const outside = outsideAddress();
    if (outside !== undefined) {
      expect(await connects(outside, Number(workersPort))).toBe(true);
      expect(await connects(outside, Number(apiPort))).toBe(false);
    }
  } finally {
    r.kill("SIGTERM");
    await r.exited;
  }
});

test("the API alone: docs/api.md's smallest deployment starts with --api-port, and the API answers", { timeout: 120_000 }, async () => {
  const p = project();
  // As docs/api.md writes them.
  p.write({ "wrangler.toml": 'name = "api-only"\nmain = "worker.js"\n', "worker.js": "export default {};\n" });
  const r = run(["dev", "--api-port", "0", "--port", "0"], p.dir);
  try {
    const [, apiPort] = await waitFor(r, /queues API listening on http:\/\/127\.0\.0\.1:(\d+)\/v1/, 60_000);
    const response = await fetch(`http://127.0.0.1:${apiPort}/v1/orgs/acme/projects/shop/envs/prod/queues`);
    expect(response.status).toBe(401);
    expect(r.output()).toMatch(/compatibility_date: is not set; running with/);
  } finally {
    r.kill("SIGTERM");
    await r.exited;
  }
});
