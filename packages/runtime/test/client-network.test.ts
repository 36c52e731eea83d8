import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { limits } from "@celld/queue-cell";
import { QueuesApiError, QueuesClient } from "../src/client/index.ts";
import { clientDefaults } from "../src/client/client.ts";
import { run, waitFor } from "../../../test/cli-harness.ts";
import { apiLimits } from "../src/api/api-limits.ts";
import { testEnv } from "./api-harness.ts";

/** A port nothing listens on: taken from the kernel, then let go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `celld dev --api-port 0` as a user runs it, with a key for the test's environment. */
async function celldDev() {
  const dir = mkdtempSync(join(tmpdir(), "celld-client-net-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "wrangler.toml"), `name = "net"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n`);
  writeFileSync(join(dir, "worker.js"), "export default { fetch() { return new Response('hi'); } };\n");
  const [, org, , project, , env] = testEnv.split("/") as [string, string, string, string, string, string];
  const keys = run(["keys", "create", "--org", org, "--project", project, "--env", env, "--scope", "events:publish", "--scope", "events:write", "--scope", "events:read", "--data", join(dir, "data")], dir);
  expect(await keys.exited).toBe(0);
  const apiKey = keys.output().match(/^(ck_\S+)$/m)![1]!;
  // Its own process group, so the test can kill celld and its workerd at once, as a crash would.
  const dev = run(["dev", "--port", "0", "--api-port", "0", "--data", join(dir, "data")], dir, { detached: true });
  onTestFinished(async () => {
    try {
      dev.killGroup("SIGKILL");
    } catch {
      // Already gone.
    }
    await dev.exited;
  });
  const url = (await waitFor(dev, /queues API listening on (http:\/\/\S+)\/v1/))[1]!;
  return { dev, url, apiKey };
}

describe("a network failure is a QueuesApiError too", () => {
  it("a port nothing listens on: network_error, retryable, nothing sent, the cause kept", async () => {
    const port = await closedPort();
    for (const format of ["protobuf", "json"] as const) {
      const client = new QueuesClient({ url: `http://127.0.0.1:${port}`, apiKey: "ck_x", env: testEnv, format });
      for (const call of [() => client.getQueue("jobs"), () => client.send("jobs", [{ id: "a", source: "/c", type: "t" }])]) {
        const error = await call().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(QueuesApiError);
        expect(error).toMatchObject({ status: 0, code: "network_error", retryable: true, retryAfterSeconds: undefined, field: undefined });
        expect((error as Error).message).toBe(`could not connect to http://127.0.0.1:${port} (connect ECONNREFUSED 127.0.0.1:${port}); nothing of this call was sent`);
        expect((error as Error).cause).toMatchObject({ code: "ECONNREFUSED" });
      }
      await client.close();
    }
  });

  it("celld killed while a long poll waits: network_error, retryable, and the call may have taken effect", async () => {
    const { dev, url, apiKey } = await celldDev();
    const client = new QueuesClient({ url, apiKey, env: testEnv });
    await client.createQueue("jobs");
    const polling = client.lease("jobs", { wait: 20 });
    polling.catch(() => undefined);
    // Until the poll has reached celld: it is on its connection then, and stays 20 s.
    await new Promise((resolve) => setTimeout(resolve, 500));
    dev.killGroup("SIGKILL");
    const error = await polling.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueuesApiError);
    expect(error).toMatchObject({ status: 0, code: "network_error", retryable: true });
    expect((error as Error).message).toMatch(new RegExp(`^the connection to ${url} failed before the answer came \\(.+\\); the call may have taken effect$`));
    expect((error as Error).cause).toMatchObject({ code: "UND_ERR_SOCKET" });
    await client.close();
  }, 60_000);
});

describe("the client's connections to celld dev", () => {
  it("1,000 sends started at once are queued on a bounded pool: none is refused", async () => {
    // A client alone must not be able to overload a queue with sends.
    expect(clientDefaults.connections).toBeLessThan(limits.producerCallsInFlightMax);
    const { url, apiKey } = await celldDev();
    const client = new QueuesClient({ url, apiKey, env: testEnv });
    await client.createQueue("jobs");
    // Unbounded, the pool opened a socket per send, and the queue refused hundreds of them (429
    // overloaded) past its 256 sends in flight.
    const outcomes = await Promise.allSettled(Array.from({ length: 1_000 }, (_, i) => client.send("jobs", [{ id: `e${i}`, source: "/c", type: "t", data: i }])));
    const refused = outcomes.filter((o) => o.status === "rejected").map((o) => String((o as PromiseRejectedResult).reason));
    expect(refused.slice(0, 3)).toEqual([]);
    const pool = (client as unknown as { dispatcher: { stats: { connected: number } } }).dispatcher;
    expect(pool.stats.connected).toBeGreaterThan(0);
    expect(pool.stats.connected).toBeLessThanOrEqual(clientDefaults.connections);
    expect((await client.getQueue("jobs")).counts!.ready).toBe(1_000);
    await client.close();
  }, 60_000);
});

// Past the bound on what celld reads of a refused body, it closes the connection under the body:
// the client saw a broken pipe, a network_error "retryable" and "may have taken effect" that no
// retry could help.
describe("a body over the API's cap, sent to celld dev", () => {
  it("a send or publish is body_too_large however far over the cap, never a network_error", async () => {
    const { url, apiKey } = await celldDev();
    const refusals: Array<Record<string, unknown>> = [];
    for (const format of ["protobuf", "json"] as const) {
      const client = new QueuesClient({ url, apiKey, env: testEnv, format });
      await client.createQueue(`jobs-${format}`);
      const over = (bytes: number) => [{ id: "big", source: "/c", type: "t", data: "a".repeat(bytes) }];
      for (const bytes of [apiLimits.sendBodyBytesMax, apiLimits.refusedBodyDrainBytesMax * 2]) {
        for (const call of [() => client.send(`jobs-${format}`, over(bytes)), () => client.publish(over(bytes))]) {
          const error = await call().catch((e: unknown) => e);
          expect(error).toBeInstanceOf(QueuesApiError);
          const { status, code, field, bound, message, retryable } = error as QueuesApiError;
          refusals.push({ format, bytes, status, code, field, bound, message, retryable });
        }
      }
      expect((await client.getQueue(`jobs-${format}`)).counts!.ready).toBe(0);
      await client.close();
    }
    // celld's own answer (a body just over the cap, read and refused) says what every one says.
    const answer = { status: 413, code: "body_too_large", field: "body", bound: `at most ${apiLimits.sendBodyBytesMax} bytes`, retryable: false };
    expect(refusals[0]).toMatchObject(answer);
    expect(refusals).toEqual(refusals.map(({ format, bytes }) => ({ ...refusals[0], format, bytes })));
  }, 60_000);
});
