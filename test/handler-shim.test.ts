import { expect, test } from "vitest";
import { eventually, tidyAfterEach, type RunningHost } from "./host-harness.ts";

// The host wraps a Worker's default export to report what its handlers throw. Whatever shape the
// export has, the Worker must behave as it does in plain workerd: its handlers run on the author's
// own object, with that object's state.

const tidy = tidyAfterEach();

const wrangler = (extra = "") => `name = "web"
main = "index.js"
compatibility_date = "2025-09-01"
${extra}`;

/** The host log once a line matches `pattern`, as one text. */
function logOnceItShows(running: RunningHost, pattern: RegExp, what: string): Promise<string> {
  const log = running.log;
  return eventually(() => {
    const text = log.lines.join("\n");
    return pattern.test(text) ? text : undefined;
  }, what);
}

test("a class instance as the default export keeps its private fields and state across requests and batches", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": wrangler(`queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]
`),
    "index.js": `class App {
  #hits = 0;
  #batches = 0;
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (pathname === "/throw") throw new Error(\`failed after \${this.#hits} hits\`);
    if (pathname === "/send") {
      await env.JOBS.send("job");
      return new Response("sent");
    }
    this.#hits++;
    return new Response(String(this.#hits));
  }
  async queue(batch) {
    this.#batches++;
    console.log(\`batch \${this.#batches} of "\${batch.queue}"\`);
  }
}
export default new App();
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect(await (await running.fetch("/")).text()).toBe("1");
  expect(await (await running.fetch("/")).text()).toBe("2");
  expect((await running.fetch("/throw")).status).toBe(500);
  await logOnceItShows(running, /\[celld\] fetch\(\) handler for GET \/throw threw: Error: failed after 2 hits/, "the thrown error");

  for (const n of [1, 2]) {
    expect(await (await running.fetch("/send")).text()).toBe("sent");
    await logOnceItShows(running, new RegExp(`stdout: batch ${n} of "jobs"`), `batch ${n}`);
  }
  expect(running.log.lines.join("\n")).not.toContain("private member");
});

test("an object's getters, non-enumerable properties and state are its own: the handler's this is the exported object", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": wrangler(),
    "index.js": `const app = {
  hits: 0,
  get label() {
    return \`hits=\${this.hits}\`;
  },
  async fetch() {
    this.hits++;
    return new Response(\`\${this.label} module=\${app.hits} \${this.secret}\`);
  },
};
Object.defineProperty(app, "secret", { value: "kept", enumerable: false });
export default app;
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect(await (await running.fetch("/")).text()).toBe("hits=1 module=1 kept");
  expect(await (await running.fetch("/")).text()).toBe("hits=2 module=2 kept");
});
