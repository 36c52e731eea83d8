import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { request } from "undici";
import { onTestFinished } from "vitest";
import { CellRegistry, ManualClock } from "@celld/queue-cell";
import { ApiKeyStore, startApiServer, type ApiScope, type ApiServer, type ApiServerOptions } from "../src/api/index.ts";

export const testEnv = "orgs/acme/projects/shop/envs/prod";
export const allScopes: ApiScope[] = ["events:publish", "events:write", "events:read"];

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  /** Sent as is, instead of JSON of `body`. */
  raw?: Uint8Array | string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Uint8Array;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read answers by field
  json: any;
}

/**
 * A real API server on a free port over a fresh data dir, with a ManualClock shared by the cells
 * and the API. Everything is closed and removed after the test.
 */
export async function apiHarness(options: Partial<ApiServerOptions> = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), "celld-api-"));
  const clock = new ManualClock();
  const registry = new CellRegistry({ dataDir, clock, durability: "off" });
  const keys = ApiKeyStore.open(dataDir, { clock });
  const server: ApiServer = await startApiServer({ registry, keys, dataDir, clock, port: 0, ...options });
  // onTestFinished: an afterEach registered while a test runs never runs.
  onTestFinished(async () => {
    await server.close();
    await registry.closeAll();
    keys.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const defaultKey = keys.create({ env: testEnv, scopes: allScopes, name: "test" }).key;

  function key(scopes: readonly ApiScope[] = allScopes, env = testEnv): string {
    return keys.create({ env, scopes }).key;
  }

  async function call(method: string, path: string, opts: CallOptions = {}): Promise<CallResult> {
    const headers: Record<string, string> = { ...opts.headers };
    const token = opts.key === undefined ? defaultKey : opts.key;
    if (token !== null) headers["authorization"] = `Bearer ${token}`;
    let body: Uint8Array | string | undefined = opts.raw;
    if (body === undefined && opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await request(`${server.url}${path}`, {
      method: method as "GET",
      headers,
      body,
      signal: opts.signal,
    });
    const bytes = new Uint8Array(await res.body.arrayBuffer());
    const type = String(res.headers["content-type"] ?? "");
    const json = type.startsWith("application/json") && bytes.byteLength > 0 ? JSON.parse(Buffer.from(bytes).toString("utf8")) : undefined;
    return { status: res.statusCode, headers: res.headers, bytes, json };
  }

  const queuePath = (queue: string, env = testEnv): string => `/v1/${env}/queues/${queue}`;

  /**
   * Starts `poll` and resolves once a long poll is waiting in a cell: a waiting lease arms a timer
   * on the shared ManualClock, so the count of pending timers says when it has arrived. Returns
   * the poll's own promise, still pending.
   */
  async function whenWaiting<T>(poll: () => Promise<T>): Promise<{ result: Promise<T> }> {
    const before = clock.pendingTimers();
    const result = poll();
    result.catch(() => undefined);
    await eventually(() => clock.pendingTimers() > before);
    return { result };
  }

  async function createQueue(queue: string, settings: Record<string, unknown> = {}, env = testEnv): Promise<CallResult> {
    const key = env === testEnv ? defaultKey : keys.create({ env, scopes: allScopes }).key;
    const res = await call("POST", `/v1/${env}/queues`, { key, body: { name: queue, ...settings } });
    if (res.status !== 201) throw new Error(`create ${queue}: ${res.status} ${JSON.stringify(res.json)}`);
    return res;
  }

  return { dataDir, clock, registry, keys, server, defaultKey, key, call, queuePath, createQueue, whenWaiting };
}

export function event(id: string, data: unknown = { n: id }, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { specversion: "1.0", id, source: "/tests", type: "test.event", data, ...extra };
}

/** Polls `check` on real time until it passes; for effects of socket events, never for cell time. */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * A lease of 100 on a raw connection whose client reads nothing: its answer stays in the server's
 * budget of unread answers until the socket is destroyed.
 */
export function unreadLease(url: string, key: string, queue: string): Promise<Socket> {
  const { port, hostname } = new URL(url);
  const body = JSON.stringify({ max_messages: 100 });
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `POST /v1/${testEnv}/queues/${queue}:lease HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      resolve(socket);
    });
    socket.on("error", () => {});
    socket.pause();
  });
}
