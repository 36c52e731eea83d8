import { join } from "node:path";
import { expect, test } from "vitest";
import { loadDeployment } from "../packages/runtime/src/config/index.ts";
import { startHost } from "../packages/runtime/src/host/host.ts";
import { MemoryHostLog } from "../packages/runtime/src/host/host-log.ts";
import { logOnceItShows, tidyAfterEach } from "./host-harness.ts";

// workerd prints stack positions in the bundle under the name of the Worker's main file; the host
// maps them through the bundle's source map, so the log names the file and line the author wrote.

const tidy = tidyAfterEach();

// The error is constructed in work.ts on line 5 (`new` is column 9); index.ts (without extra
// imports) calls fail() on line 12, column 12, from fetch() and on line 15, column 5, from queue().
const work = `export function fail(what: string): never {
  const detail: string = \`\${what} failed\`;
  // Lines of types and comments that the bundle does not keep,
  // so that a bundle line would be wrong.
  throw new Error(detail);
}
`;

function index(imports = ""): string {
  return `import { fail } from "./work.ts";
${imports}
interface Env {
  JOBS: Queue<string>;
}
export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    if (new URL(request.url).pathname === "/send") {
      await env.JOBS.send("job");
      return new Response("sent");
    }
    return fail("fetch");
  },
  async queue(batch: MessageBatch<string>): Promise<void> {
    fail(\`queue \${batch.queue}\`);
  },
};
`;
}

const wrangler = `name = "web"
main = "src/index.ts"
compatibility_date = "2025-09-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]
`;

test("a fetch() and a queue() handler's stacks name the TypeScript file and line that threw, not the bundle or the shim", async () => {
  const p = tidy.project();
  const config = p.write({ "wrangler.toml": wrangler, "src/index.ts": index(), "src/work.ts": work });
  const running = await tidy.runHost([config], p.dataDir);
  const workTs = `file://${join(p.dir, "src", "work.ts")}`;
  const indexTs = `file://${join(p.dir, "src", "index.ts")}`;

  expect((await running.fetch("/throw")).status).toBe(500);
  const afterFetch = await logOnceItShows(running, /fetch failed\n.*\n.*Object\.fetch.*\)/, "the fetch() handler's stack");
  expect(afterFetch).toContain(
    `stderr: [celld] fetch() handler for GET /throw threw: Error: fetch failed\n` +
      `stderr:     at fail (${workTs}:5:9)\n` +
      `stderr:     at Object.fetch (${indexTs}:12:12)`,
  );

  expect((await running.fetch("/send")).status).toBe(200);
  const afterQueue = await logOnceItShows(running, /queue jobs failed\n.*\n.*Object\.queue.*\)/, "the queue() handler's stack");
  expect(afterQueue).toContain(
    `stderr: [celld] queue() handler for "jobs" threw: Error: queue jobs failed\n` +
      `stderr:     at fail (${workTs}:5:9)\n` +
      `stderr:     at Object.queue (${indexTs}:15:5)`,
  );
  // Neither the shim's frames nor the bundle's positions under main's name reach the log.
  expect(afterQueue).not.toContain("celld-entry");
  const indexPositions = new Set(afterQueue.match(/index\.ts:\d+:\d+/g));
  expect(indexPositions).toEqual(new Set(["index.ts:12:12", "index.ts:15:5"]));
});

test("a Worker that imports a text module (loaded as a list of modules) is mapped the same way", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": wrangler,
    "src/index.ts": index(`import greeting from "./greeting.txt";\nconsole.log(greeting);`),
    "src/work.ts": work,
    "src/greeting.txt": "hello",
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect((await running.fetch("/throw")).status).toBe(500);
  const text = await logOnceItShows(running, /fetch failed\n.*\n.*Object\.fetch.*\)/, "the fetch() handler's stack");
  expect(text).toContain(`stderr:     at fail (file://${join(p.dir, "src", "work.ts")}:5:9)\n`);
  expect(text).not.toContain("celld-entry");
});

test("positions in an error workerd reports while it loads a Worker (a module named relative to main's directory) are mapped too", async () => {
  const p = tidy.project();
  // JSON.parse fails in conf.ts on line 5 (`parse` is column 15), called from index.ts on line 4
  // (`load`, column 14).
  const config = p.write({
    "wrangler.toml": `name = "web"\nmain = "src/index.ts"\ncompatibility_date = "2025-09-01"\n`,
    "src/conf.ts": `interface Conf {
  a: number;
}
export function load(text: string): Conf {
  return JSON.parse(text) as Conf;
}
`,
    "src/index.ts": `import { load } from "./conf.ts";
interface Env {}
// Types and comments the bundle drops.
const conf = load("{bad json");
export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    return new Response(String(conf.a));
  },
};
`,
  });
  const log = new MemoryHostLog();
  await expect(startHost({ deployment: loadDeployment([config]), dataDir: p.dataDir, port: 0, log })).rejects.toMatchObject({
    code: "ERR_RUNTIME_START",
  });
  // All of workerd's report is in the log by the time the start fails, its positions mapped.
  const text = log.lines.join("\n");
  expect(text).toMatch(/stderr: service core:user:web: Uncaught SyntaxError: .*\nstderr:   at .* in load\nstderr:   at \S+$/);
  expect(text).toContain(`stderr:   at ${join(p.dir, "src", "conf.ts")}:5:15 in load\nstderr:   at ${join(p.dir, "src", "index.ts")}:4:14`);
});
