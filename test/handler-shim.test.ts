import { expect, test } from "vitest";
import { logOnceItShows, tidyAfterEach } from "./host-harness.ts";

// The host wraps a Worker's default export to report what its handlers throw. Whatever shape the
// export has, the Worker must behave as it does in plain workerd: its handlers run on the author's
// own object, with that object's state.

const tidy = tidyAfterEach();

const wrangler = (extra = "") => `name = "web"
main = "index.js"
compatibility_date = "2025-09-01"
${extra}`;

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

// later() rejects on line 6 of index.ts (`new` at column 9); the bundle has no interface lines,
// so a position left unmapped would name another line.
const rejecting = `interface Env {
  JOBS: Queue<string>;
}
async function later(what: string): Promise<void> {
  await null;
  throw new Error(\`\${what} failed\`);
}
`;

test("a rejected ctx.waitUntil() promise and an unhandled rejection reach the log with source positions, once each, and the response is unchanged", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": wrangler(`queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]
`).replace('"index.js"', '"index.ts"'),
    "index.ts": `${rejecting}
export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname === "/wait") ctx.waitUntil(later("waitUntil"));
    if (pathname === "/loose") void later("loose");
    if (pathname === "/both") {
      // The same error in waitUntil() and, through then(), in a promise nobody handles.
      const promise = later("both");
      ctx.waitUntil(promise);
      promise.then(() => undefined);
    }
    if (pathname === "/thrown") {
      // And in waitUntil() and thrown by the handler.
      const promise = later("thrown");
      ctx.waitUntil(promise);
      await promise;
    }
    if (pathname === "/send") await env.JOBS.send("job");
    if (pathname === "/mark") console.error("mark");
    return new Response(\`ok \${pathname}\`);
  },
  async queue(batch: MessageBatch<string>, env: Env, ctx: ExecutionContext): Promise<void> {
    ctx.waitUntil(later(\`queue \${batch.queue}\`));
  },
};
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  const indexTs = `file://${p.dir}/index.ts`;
  for (const path of ["/wait", "/loose", "/both"]) {
    const response = await running.fetch(path);
    expect({ path, status: response.status, body: await response.text() }).toEqual({ path, status: 200, body: `ok ${path}` });
  }
  expect((await running.fetch("/thrown")).status).toBe(500);
  expect(await (await running.fetch("/send")).text()).toBe("ok /send");
  await logOnceItShows(running, /queue jobs failed/, "the queue() handler's waitUntil() rejection");
  // A line on stderr after every other request's output.
  expect(await (await running.fetch("/mark")).text()).toBe("ok /mark");
  const text = await logOnceItShows(running, /stderr: mark/, "the mark");

  expect(text).toContain(
    `stderr: [celld] a ctx.waitUntil() promise of the fetch() handler for GET /wait rejected: Error: waitUntil failed\n` +
      `stderr:     at later (${indexTs}:6:9)`,
  );
  expect(text).toContain(`stderr: [celld] unhandled promise rejection: Error: loose failed\nstderr:     at later (${indexTs}:6:9)`);
  expect(text).toContain(
    `stderr: [celld] a ctx.waitUntil() promise of the queue() handler for "jobs" rejected: Error: queue jobs failed\n` +
      `stderr:     at later (${indexTs}:6:9)`,
  );
  expect(text).toContain(`stderr: [celld] fetch() handler for GET /thrown threw: Error: thrown failed\n`);
  for (const what of ["waitUntil", "loose", "both", "thrown", "queue jobs"]) {
    expect({ what, times: text.split(`${what} failed`).length - 1 }).toEqual({ what, times: 1 });
  }
});

test("a WorkerEntrypoint's this.ctx.waitUntil() rejection reaches the log too", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": wrangler().replace('"index.js"', '"index.ts"'),
    "index.ts": `import { WorkerEntrypoint } from "cloudflare:workers";
${rejecting}
export default class Web extends WorkerEntrypoint {
  async fetch(): Promise<Response> {
    this.ctx.waitUntil(later("entrypoint"));
    return new Response("ok");
  }
}
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect(await (await running.fetch("/")).text()).toBe("ok");
  const text = await logOnceItShows(running, /entrypoint failed\n.*at later/, "the waitUntil() rejection and its stack");
  expect(text).toContain(
    `stderr: [celld] a ctx.waitUntil() promise of the fetch() handler for GET / rejected: Error: entrypoint failed\n` +
      // One line further down, below the import.
      `stderr:     at later (file://${p.dir}/index.ts:7:9)`,
  );
});
