/**
 * `celld dev --inspector-port`: the Workers' inspector, as Chrome DevTools and VS Code reach it,
 * through the real CLI and workerd.
 */
import { WebSocket } from "undici";
import { afterEach, expect, test } from "vitest";
import { run, waitFor } from "./cli-harness.ts";
import { project, type Project } from "./host-harness.ts";

const projects: Project[] = [];
afterEach(() => projects.splice(0).forEach((p) => p.remove()));

let nextId = 1;

/** Sends one Chrome DevTools protocol command and waits for its answer. */
function command(socket: WebSocket, method: string, params: object = {}): Promise<unknown> {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: unknown };
      if (message.id !== id) return;
      if (message.error !== undefined) reject(new Error(JSON.stringify(message.error)));
      else resolve(message.result);
    });
    socket.send(JSON.stringify({ id, method, params }));
  });
}

test("--inspector-port serves one target per Worker of the deployment, none of celld's own, and it evaluates in the Worker", async () => {
  const p = project();
  projects.push(p);
  p.write({
    "wrangler.toml": `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs" }]
`,
    "worker.js": `globalThis.answer = 42;
export default {
  async fetch() { return new Response("ok"); },
  async queue() {},
};
`,
  });
  const r = run(["dev", "--port", "0", "--inspector-port", "0"], p.dir);
  const [, url] = await waitFor(r, /listening on (http:\/\/\S+)/);
  const [, inspector, port] = await waitFor(r, /inspector listening on (ws:\/\/127\.0\.0\.1:(\d+)\/) \(Chrome: chrome:\/\/inspect, Configure\.\.\. 127\.0\.0\.1:(\d+)\)/);
  expect(r.output()).toContain(`Configure... 127.0.0.1:${port})`);

  const targets = (await (await fetch(new URL("/json/list", inspector!.replace("ws:", "http:")))).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  expect(targets.map((t) => t.webSocketDebuggerUrl)).toEqual([`${inspector}app`]);

  // As DevTools connects: Miniflare's proxy refuses an upgrade from a client with a user agent
  // (undici has one) and no Origin of a local or DevTools page.
  const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl, { headers: { origin: "http://localhost" } } as never);
  await new Promise((resolve, reject) => {
    socket.addEventListener("open", resolve);
    socket.addEventListener("error", reject);
  });
  // The Worker's context is announced once the runtime is enabled; workerd names no default one.
  const context = new Promise<number>((resolve) => {
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { method?: string; params?: { context: { id: number } } };
      if (message.method === "Runtime.executionContextCreated") resolve(message.params!.context.id);
    });
  });
  await command(socket, "Runtime.enable");
  const evaluated = (await command(socket, "Runtime.evaluate", { expression: "globalThis.answer", contextId: await context })) as {
    result: { value: unknown };
  };
  expect(evaluated.result.value).toBe(42);
  socket.close();

  expect(await (await fetch(url!)).text()).toBe("ok");
  r.kill("SIGINT");
  expect(await r.exited).toBe(0);
}, 60_000);
