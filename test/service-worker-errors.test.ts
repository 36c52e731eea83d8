import { expect, test } from "vitest";
import { eventually, logOnceItShows, tidyAfterEach } from "./host-harness.ts";

// A service-worker script (addEventListener) gets what a module Worker's shim gives: what its
// listeners throw, and rejected respondWith() and waitUntil() promises, are in the host's log with
// the author's files and lines (service-worker-shim.ts). workerd's own informational reports of the
// same errors stay dropped, so nothing is printed twice.

const tidy = tidyAfterEach();

// The error is constructed in work.ts on line 5 (`new` is column 9).
const work = `export function fail(what: string): never {
  const detail: string = \`\${what} failed\`;
  // Lines of types and comments that the bundle does not keep,
  // so that a bundle line would be wrong.
  throw new Error(detail);
}
export async function later(what: string): Promise<never> {
  await null;
  return fail(what);
}
`;

const worker = `import { fail, later } from "./work.ts";
addEventListener("fetch", (event: FetchEvent) => {
  const { pathname } = new URL(event.request.url);
  if (pathname === "/throw") fail("throw");
  if (pathname === "/respond") return event.respondWith(later("respond"));
  if (pathname === "/wait") event.waitUntil(later("wait"));
  if (pathname === "/loose") void later("loose");
  if (pathname === "/mark") console.error("mark");
  event.respondWith(new Response(\`ok \${pathname}\`));
});
`;

// A line of workerd's own, or a frame it printed, that the host should have dropped.
const workerdLine = (l: string) => /workerd\/|info:|uncaught exception|Uncaught|^std(?:out|err): stack:/.test(l);

test("a service-worker fetch listener's throw, its rejected respondWith() and waitUntil() promises reach the log once each, mapped to the author's lines", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "sw"
main = "src/worker.ts"
compatibility_date = "2026-04-01"
`,
    "src/worker.ts": worker,
    "src/work.ts": work,
  });
  const running = await tidy.runHost([config], p.dataDir);
  const workTs = `file://${p.dir}/src/work.ts`;
  const workerTs = `file://${p.dir}/src/worker.ts`;

  expect((await running.fetch("/throw")).status).toBe(500);
  expect((await running.fetch("/respond")).status).toBe(500);
  for (const path of ["/wait", "/loose"]) expect(await (await running.fetch(path)).text()).toBe(`ok ${path}`);
  expect(await (await running.fetch("/mark")).text()).toBe("ok /mark");
  const text = await logOnceItShows(running, /stdout: mark/, "the mark");

  expect(text).toContain(
    `stderr: [celld] "fetch" listener for GET /throw threw: Error: throw failed\n` +
      `stderr:     at fail (${workTs}:5:9)\n` +
      `stderr:     at ${workerTs}:4:30\n`,
  );
  expect(text).toContain(
    `stderr: [celld] the event.respondWith() promise of the "fetch" listener for GET /respond rejected: Error: respond failed\n` +
      `stderr:     at fail (${workTs}:5:9)\n` +
      `stderr:     at later (${workTs}:9:10)\n`,
  );
  expect(text).toContain(
    `stderr: [celld] an event.waitUntil() promise of the "fetch" listener for GET /wait rejected: Error: wait failed\n` +
      `stderr:     at fail (${workTs}:5:9)\n`,
  );
  expect(text).toContain(`stderr: [celld] unhandled promise rejection: Error: loose failed\nstderr:     at fail (${workTs}:5:9)\n`);
  for (const what of ["throw", "respond", "wait", "loose"]) {
    expect({ what, times: text.split(`${what} failed`).length - 1 }).toEqual({ what, times: 1 });
  }
  // Every frame is the author's, at a line of the file it names: none of the shim's, none of the bundle's.
  const frames = running.log.lines.filter((l) => /^std(?:out|err):\s+at /.test(l));
  expect(frames.length).toBeGreaterThan(0);
  const linesOf = { [workTs]: work.split("\n").length, [workerTs]: worker.split("\n").length };
  const outside = frames.filter((l) => {
    const at = /\((file:[^)]+):(\d+):\d+\)$|at (file:\S+):(\d+):\d+$/.exec(l);
    const file = at?.[1] ?? at?.[3];
    const line = Number(at?.[2] ?? at?.[4]);
    return file === undefined || !(file in linesOf) || line > linesOf[file]!;
  });
  expect(outside).toEqual([]);
  expect(running.log.lines.filter(workerdLine)).toEqual([]);
});

test("the wrapped addEventListener keeps its meaning: a listener added twice is one, removing it removes it, an object's handleEvent is reported", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "sw"
main = "worker.js"
compatibility_date = "2026-04-01"
`,
    "worker.js": `const first = (event) => event.respondWith(new Response("first"));
addEventListener("fetch", first);
self.addEventListener("fetch", first);
removeEventListener("fetch", first);
let calls = 0;
addEventListener("fetch", {
  handleEvent(event) {
    calls += 1;
    if (new URL(event.request.url).pathname === "/obj") throw new Error("object listener failed");
    event.respondWith(new Response(\`object \${calls}\`));
  },
});
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect(await (await running.fetch("/")).text()).toBe("object 1");
  expect((await running.fetch("/obj")).status).toBe(500);
  const text = await logOnceItShows(running, /object listener failed/, "the object listener's report");
  expect(text).toContain('stderr: [celld] "fetch" listener for GET /obj threw: Error: object listener failed\n');
  expect(await (await running.fetch("/")).text()).toBe("object 3");
});

test("a listener added through self or the global scope's prototype chain is reported too; EventTarget's and WorkerGlobalScope's addEventListener refuse the global scope, as in workerd", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "sw"
main = "worker.js"
compatibility_date = "2026-04-01"
`,
    "worker.js": `const failing = (path) => (event) => {
  if (new URL(event.request.url).pathname === path) throw new Error(\`listener for \${path} failed\`);
};
self.addEventListener("fetch", failing("/self"));
// The global scope's own addEventListener, where workerd defines it.
Object.getPrototypeOf(self).addEventListener.call(self, "fetch", failing("/scope"));
const removed = failing("/removed");
Object.getPrototypeOf(self).addEventListener.call(self, "fetch", removed);
Object.getPrototypeOf(self).removeEventListener.call(self, "fetch", removed);
const refused = [EventTarget, WorkerGlobalScope].map((type) => {
  try {
    type.prototype.addEventListener.call(globalThis, "fetch", failing("/refused"));
    return "not refused";
  } catch (error) {
    return error.name;
  }
});
addEventListener("fetch", (event) => event.respondWith(new Response(refused.join(" "))));
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect(await (await running.fetch("/")).text()).toBe("TypeError TypeError");
  for (const path of ["/self", "/scope"]) expect((await running.fetch(path)).status).toBe(500);
  expect(await (await running.fetch("/removed")).text()).toBe("TypeError TypeError");
  await running.fetch("/mark");
  const text = await logOnceItShows(running, /listener for \/self failed[^]*listener for \/scope failed/, "both reports");
  expect(text).toContain('stderr: [celld] "fetch" listener for GET /self threw: Error: listener for /self failed\n');
  expect(text).toContain('stderr: [celld] "fetch" listener for GET /scope threw: Error: listener for /scope failed\n');
  expect(text).not.toContain("/removed failed");
  expect(running.log.lines.filter(workerdLine)).toEqual([]);
});

test("a module Worker and a service-worker script in one deployment: each error is printed once, by its own shim", async () => {
  const p = tidy.project();
  const sw = p.write({
    "sw/wrangler.toml": `name = "sw"
main = "worker.js"
compatibility_date = "2026-04-01"
`,
    "sw/worker.js": `addEventListener("fetch", (event) => {
  const { pathname } = new URL(event.request.url);
  if (pathname === "/wait") event.waitUntil(Promise.reject(new Error("sw wait failed")));
  if (pathname === "/throw") throw new Error("sw throw failed");
  if (pathname === "/mark") console.log("sw mark");
  event.respondWith(new Response("sw"));
});
`,
  });
  const mod = p.write({
    "mod/wrangler.toml": `name = "mod"
main = "worker.js"
compatibility_date = "2026-04-01"
`,
    "mod/worker.js": `export default {
  async fetch(request, env, ctx) {
    const { pathname } = new URL(request.url);
    if (pathname === "/wait") ctx.waitUntil(Promise.reject(new Error("mod wait failed")));
    if (pathname === "/throw") throw new Error("mod throw failed");
    if (pathname === "/mark") console.log("mod mark");
    return new Response("mod");
  },
};
`,
  });
  const running = await tidy.runHost([sw, mod], p.dataDir);
  const modWorker = await running.host.miniflare.getWorker("mod");
  expect((await running.fetch("/throw")).status).toBe(500);
  expect(await (await running.fetch("/wait")).text()).toBe("sw");
  await expect(modWorker.fetch("http://x/throw")).rejects.toThrow("mod throw failed");
  expect(await (await modWorker.fetch("http://x/wait")).text()).toBe("mod");
  await running.fetch("/mark");
  await modWorker.fetch("http://x/mark");
  const text = await logOnceItShows(running, /sw mark[^]*mod mark|mod mark[^]*sw mark/, "both marks");

  expect(text).toContain(`stderr: [celld] "fetch" listener for GET /throw threw: Error: sw throw failed\n`);
  expect(text).toContain(`stderr: [celld] an event.waitUntil() promise of the "fetch" listener for GET /wait rejected: Error: sw wait failed\n`);
  expect(text).toContain(`stderr: [celld] fetch() handler for GET /throw threw: Error: mod throw failed\n`);
  expect(text).toContain(`stderr: [celld] a ctx.waitUntil() promise of the fetch() handler for GET /wait rejected: Error: mod wait failed\n`);
  for (const what of ["sw throw", "sw wait", "mod throw", "mod wait"]) {
    expect({ what, times: text.split(`${what} failed`).length - 1 }).toEqual({ what, times: 1 });
  }
  expect(running.log.lines.filter(workerdLine)).toEqual([]);
});

test("a service-worker script cannot fake or hide a queue's errors, nor find its token", async () => {
  const p = tidy.project();
  // "sw" is served first; it sends to "jobs", consumed by "app", whose handler throws.
  const sw = p.write({
    "sw/wrangler.toml": `name = "sw"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }, { binding = "OWN", queue = "own" }]
queues.consumers = [{ queue = "own", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]
`,
    "sw/worker.js": `const record = JSON.stringify({ queue: "jobs", tag: "t1", text: '[celld] queue() handler for "jobs" threw: Error: boom' });
const tokenLike = (v) => (typeof v === "string" || typeof v === "function") && /[0-9a-f]{32}/.test(String(v));
// What a stack's call sites hand out: any function among them whose source holds a token.
const callSiteLeaks = () => {
  const before = Error.prepareStackTrace;
  Error.prepareStackTrace = (_, sites) => sites.map((s) => s.getFunction()).filter(tokenLike).length;
  try {
    return new Error().stack;
  } finally {
    Error.prepareStackTrace = before;
  }
};
const atLoad = callSiteLeaks();
addEventListener("fetch", (event) => {
  const { pathname } = new URL(event.request.url);
  if (pathname === "/forge") {
    console.error("[celld:queue-error] " + record);
    console.error("[celld:queue-error " + "0".repeat(32) + "] " + record);
    return event.respondWith(new Response("forged"));
  }
  if (pathname === "/scan") {
    const places = [...Object.getOwnPropertyNames(globalThis).map((k) => { try { return globalThis[k]; } catch { return undefined; } }),
      addEventListener, removeEventListener, event.waitUntil, event.respondWith];
    return event.respondWith(new Response(JSON.stringify({ globals: places.filter(tokenLike).length, atLoad, inListener: callSiteLeaks() })));
  }
  event.respondWith((pathname === "/" ? JOBS : OWN).send({ pose: pathname === "/pose" }).then(() => new Response("sent")));
});
addEventListener("queue", (event) => {
  if (!event.messages[0].body.pose) throw new Error("own failure");
  // Its own record, naming a queue it does not consume.
  Object.defineProperty(event, "queue", { value: "jobs" });
  throw new Error("posing as jobs");
});
`,
  });
  const app = p.write({
    "app/wrangler.toml": `name = "app"
main = "worker.js"
compatibility_date = "2026-04-01"
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0, max_retries = 0 }]
`,
    "app/worker.js": `export default { async queue() { throw new Error("boom"); } };`,
  });
  const running = await tidy.runHost([sw, app], p.dataDir);
  const settled = (n: number) => eventually(() => (running.batches.length >= n ? true : undefined), `${n} batches`);
  expect(await (await running.fetch("/forge")).text()).toBe("forged");
  // The forged lines are the script's output, shown as written.
  await logOnceItShows(running, /stdout: \[celld:queue-error 0{32}\] /, "the forged line with a made-up token");
  expect(running.log.lines).toContain(`stdout: [celld:queue-error] ${JSON.stringify({ queue: "jobs", tag: "t1", text: '[celld] queue() handler for "jobs" threw: Error: boom' })}`);
  // "jobs"'s own error is printed in full: the forgeries opened no window that would count it.
  await running.fetch("/");
  await settled(1);
  await logOnceItShows(running, /stderr: \[celld\] queue\(\) handler for "jobs" threw: Error: boom/, "app's report");
  // The script's own listener's error is its queue's, paired with its fate.
  await running.fetch("/own");
  await settled(2);
  await logOnceItShows(running, /stderr: \[celld\] "queue" listener for "own" threw: Error: own failure/, "sw's own report");
  // A record the shim writes for a queue the script does not consume is shown, not counted as that queue's.
  for (const n of [3, 4]) {
    await running.fetch("/pose");
    await settled(n);
  }
  const posing = 'stderr: [celld] "queue" listener for "jobs" threw: Error: posing as jobs';
  await eventually(() => (running.log.lines.filter((l) => l === posing).length === 2 ? true : undefined), "both posing reports, shown");
  expect(running.log.lines.filter((l) => l.includes("celld:queue-error") && !l.includes(record("t1")))).toEqual([]);
  // Nothing the script reaches holds the token.
  expect(JSON.parse(await (await running.fetch("/scan")).text())).toEqual({ globals: 0, atLoad: 0, inListener: 0 });
});

const record = (tag: string) => JSON.stringify({ queue: "jobs", tag, text: '[celld] queue() handler for "jobs" threw: Error: boom' });
