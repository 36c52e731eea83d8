import { expect, test } from "vitest";
import { eventually, tidyAfterEach } from "./host-harness.ts";

// The first Worker answers on a socket of its own, straight into its fetch handler, as a
// production workerd does: no Miniflare entry Worker in front (its pretty error pages would show
// a stack to any client; its request.cf is made up).

const tidy = tidyAfterEach();

const wrangler = (main: string) => `name = "web"
main = "${main}"
compatibility_date = "2025-09-01"
`;

test("a fetch() handler's error is a plain 500 for the client and its stack is in the host log", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": wrangler("src/index.js"),
    "src/index.js": `export default {
  async fetch(request) {
    const { pathname } = new URL(request.url);
    if (pathname === "/throw") throw new RangeError("fetch failed on purpose");
    if (pathname === "/mark") {
      console.error("mark after the throw");
      return new Response("marked");
    }
    return Response.json({ cf: request.cf ?? null, connectingIp: request.headers.get("cf-connecting-ip"), url: request.url });
  },
};
`,
  });
  const running = await tidy.runHost([config], p.dataDir);

  const ok = await running.fetch("/hello?x=1");
  expect(ok.status).toBe(200);
  const seen = (await ok.json()) as { cf: unknown; connectingIp: unknown; url: string };
  // CF-Connecting-IP is the client's address, set by celld's front as wrangler dev's entry sets it.
  expect(seen).toEqual({ cf: null, connectingIp: "127.0.0.1", url: new URL("/hello?x=1", running.host.url).href });

  const failed = await running.fetch("/throw");
  expect(failed.status).toBe(500);
  const body = await failed.text();
  expect(body).not.toMatch(/on purpose|index\.js/);
  // workerd logs the failed request before it answers; a line on the same stream after the next
  // request comes after anything workerd printed about this one.
  expect(await (await running.fetch("/mark")).text()).toBe("marked");
  const log = running.log;
  const lines = await eventually(() => {
    const text = log.lines.join("\n");
    return /mark after the throw/.test(text) ? text : undefined;
  }, "the error and the mark in the host log");
  expect(lines).toMatch(/stderr: \[celld\] fetch\(\) handler for GET \/throw threw: RangeError: fetch failed on purpose/);
  expect(lines).toMatch(/at .*src\/index\.js:\d+:\d+/);
  // workerd's own stack of the same exception is addresses in its binary: dropped. So is its own
  // "Uncaught exception" line for it, which says again what the shim's report said.
  expect(lines).not.toMatch(/stderr: stack: \S+@[0-9a-f]+/);
  expect(lines).not.toMatch(/Uncaught exception/);
  expect(lines.match(/fetch failed on purpose/g)).toHaveLength(1);
});

test("a WorkerEntrypoint class's fetch() error reaches the host log too, and its other methods still work", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": wrangler("index.js"),
    "index.js": `import { WorkerEntrypoint } from "cloudflare:workers";
export default class Web extends WorkerEntrypoint {
  async fetch(request) {
    if (new URL(request.url).pathname === "/throw") throw new Error("class handler failed");
    return new Response(\`\${this.constructor.name} says \${this.greet()}\`);
  }
  greet() {
    return "hi";
  }
}
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect(await (await running.fetch("/")).text()).toBe("Web says hi");
  expect((await running.fetch("/throw")).status).toBe(500);
  const log = running.log;
  await eventually(
    () => (log.lines.some((l) => /\[celld\] fetch\(\) handler for GET \/throw threw: Error: class handler failed/.test(l)) ? true : undefined),
    "the class handler's error in the host log",
  );
  // Its frame is named by the author's class, as without celld's wrapper around it.
  const frame = await eventually(() => log.lines.find((l) => l.includes("index.js:4:")), "the handler's frame");
  expect(frame).toMatch(/^stderr: {5}at Web\.fetch \(/);
});
