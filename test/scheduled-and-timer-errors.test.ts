import { expect, test } from "vitest";
import { Miniflare } from "miniflare";
import { logOnceItShows, tidyAfterEach } from "./host-harness.ts";

// What a scheduled handler or listener throws, and what a timer's callback throws, reach the log
// with the author's stack, once, for a module Worker and a service-worker script alike. workerd
// says them only among its informational lines, which the host drops (service-worker-console.ts),
// or, for a module Worker in a deployment without a service-worker script, not at all.

const tidy = tidyAfterEach();

// A line of workerd's own, or a frame it printed, that the host should have dropped.
const workerdLine = (l: string) => /workerd\/|info:|uncaught exception|Uncaught|^std(?:out|err): stack:/.test(l);

const wrangler = (name: string, extra = "") => `name = "${name}"
main = "worker.js"
compatibility_date = "2026-04-01"
${extra}`;

// Without cron triggers (cron-triggers.test.ts fires them), a Worker can run another's scheduled
// handler through a service binding (Fetcher.scheduled(), under the service_binding_extra_handlers
// flag), and the first Worker of the deployment, served at the host's URL, does so for
// /scheduled/<name>.
const trigger = `export default {
  async fetch(request, env) {
    const [, what, name] = new URL(request.url).pathname.split("/");
    if (what !== "scheduled") return new Response("no", { status: 404 });
    const result = await env[name.toUpperCase()].scheduled({ cron: "*/5 * * * *" });
    return new Response(result.outcome);
  },
};
`;

function deployment(p: ReturnType<typeof tidy.project>, sw: string, mod: string): string[] {
  return [
    p.write({
      "trigger/wrangler.toml": wrangler(
        "trigger",
        `compatibility_flags = ["service_binding_extra_handlers"]
services = [{ binding = "SW", service = "sw" }, { binding = "MOD", service = "mod" }]
`,
      ),
      "trigger/worker.js": trigger,
    }),
    p.write({ "sw/wrangler.toml": wrangler("sw"), "sw/worker.js": sw }),
    p.write({ "mod/wrangler.toml": wrangler("mod"), "mod/worker.js": mod }),
  ];
}

test("a scheduled listener's and a scheduled() handler's throw, and their rejected waitUntil() promises, reach the log once each", async () => {
  const p = tidy.project();
  const configs = deployment(
    p,
    `let runs = 0;
addEventListener("scheduled", (event) => {
  runs += 1;
  if (runs === 1) throw new Error(\`sw scheduled failed for \${event.cron}\`);
  event.waitUntil(Promise.reject(new Error("sw scheduled wait failed")));
});
addEventListener("fetch", (event) => event.respondWith(new Response("sw")));
`,
    `let runs = 0;
export default {
  async fetch() {
    return new Response("mod");
  },
  async scheduled(controller, env, ctx) {
    runs += 1;
    if (runs === 1) throw new Error(\`mod scheduled failed for \${controller.cron}\`);
    ctx.waitUntil(Promise.reject(new Error("mod scheduled wait failed")));
  },
};
`,
  );
  const running = await tidy.runHost(configs, p.dataDir);
  for (const name of ["sw", "mod"]) {
    expect(await (await running.fetch(`/scheduled/${name}`)).text()).toBe("exception");
    // A rejected waitUntil() promise fails a scheduled event too.
    expect(await (await running.fetch(`/scheduled/${name}`)).text()).toBe("exception");
  }
  const text = await logOnceItShows(running, /sw scheduled wait failed[^]*mod scheduled wait failed|mod scheduled wait failed[^]*sw scheduled wait failed/, "both reports");
  const swJs = `file://${p.dir}/sw/worker.js`;
  const modJs = `file://${p.dir}/mod/worker.js`;
  expect(text).toContain(
    `stderr: [celld] "scheduled" listener for "*/5 * * * *" threw: Error: sw scheduled failed for */5 * * * *\nstderr:     at ${swJs}:4:25\n`,
  );
  expect(text).toContain(`stderr: [celld] an event.waitUntil() promise of the "scheduled" listener for "*/5 * * * *" rejected: Error: sw scheduled wait failed\n`);
  expect(text).toContain(
    `stderr: [celld] scheduled() handler for "*/5 * * * *" threw: Error: mod scheduled failed for */5 * * * *\nstderr:     at Object.scheduled (${modJs}:8:27)\n`,
  );
  expect(text).toContain(`stderr: [celld] a ctx.waitUntil() promise of the scheduled() handler for "*/5 * * * *" rejected: Error: mod scheduled wait failed\n`);
  for (const what of ["sw scheduled failed", "sw scheduled wait failed", "mod scheduled failed", "mod scheduled wait failed"]) {
    expect({ what, times: text.split(`Error: ${what}`).length - 1 }).toEqual({ what, times: 1 });
  }
  expect(running.log.lines.filter(workerdLine)).toEqual([]);
});

// A callback run by a timer or as a microtask runs outside any handler: what it throws reaches no
// handler's report. Each kind of Worker gets the same script, in its own shape; the response waits
// until the callbacks have run (workerd cancels a request's timers once it is over).
const callbacks = (prefix: string) => `const fail = (what) => {
  throw new Error(\`${prefix} \${what} failed\`);
};
let ticks = 0;
const later = (pathname) => {
  if (pathname === "/timeout") setTimeout(() => fail("timeout"), 1);
  if (pathname === "/interval") {
    const id = setInterval(() => {
      ticks += 1;
      if (ticks === 2) clearInterval(id);
      fail(\`interval tick \${ticks}\`);
    }, 1);
  }
  if (pathname === "/microtask") queueMicrotask(() => fail("microtask"));
  return new Promise((resolve) => setTimeout(resolve, 20));
};
`;

test("what a setTimeout(), setInterval() or queueMicrotask() callback throws reaches the log once, with the author's stack, for both kinds of Worker", async () => {
  const p = tidy.project();
  const configs = deployment(
    p,
    `${callbacks("sw")}addEventListener("fetch", (event) => {
  event.respondWith(later(new URL(event.request.url).pathname).then(() => new Response("sw")));
});
`,
    `${callbacks("mod")}export default {
  async fetch(request) {
    await later(new URL(request.url).pathname);
    return new Response("mod");
  },
};
`,
  );
  const running = await tidy.runHost(configs, p.dataDir);
  const sw = await running.host.miniflare.getWorker("sw");
  const mod = await running.host.miniflare.getWorker("mod");
  for (const [name, worker] of [["sw", sw], ["mod", mod]] as const) {
    for (const path of ["/timeout", "/interval", "/microtask"]) {
      expect(await (await worker.fetch(`http://x${path}`)).text()).toBe(name);
    }
  }
  const text = await logOnceItShows(running, /sw interval tick 2[^]*mod interval tick 2|mod interval tick 2[^]*sw interval tick 2/, "the second ticks");
  for (const name of ["sw", "mod"]) {
    const js = `file://${p.dir}/${name}/worker.js`;
    const at = `stderr:     at fail (${js}:2:9)\n`;
    expect(text).toContain(`stderr: [celld] a setTimeout() callback threw: Error: ${name} timeout failed\n${at}stderr:     at ${js}:6:49\n`);
    expect(text).toContain(`stderr: [celld] a setInterval() callback threw: Error: ${name} interval tick 1 failed\n${at}`);
    expect(text).toContain(`stderr: [celld] a setInterval() callback threw: Error: ${name} interval tick 2 failed\n${at}`);
    expect(text).toContain(`stderr: [celld] a queueMicrotask() callback threw: Error: ${name} microtask failed\n${at}`);
    for (const what of ["timeout", "interval tick 1", "interval tick 2", "microtask"]) {
      expect({ name, what, times: text.split(`${name} ${what} failed`).length - 1 }).toEqual({ name, what, times: 1 });
    }
  }
  expect(text).not.toContain("interval tick 3");
  expect(running.log.lines.filter(workerdLine)).toEqual([]);
});

// A module Worker, or a library it bundles, may keep the timer functions as its module is loaded
// (`const later = setTimeout`): that runs before the entry wrapper's own code, which imports it.
test("a module Worker's callback given to a setTimeout() or queueMicrotask() it kept at load is reported too, with the author's stack alone", async () => {
  const p = tidy.project();
  const config = p.write({
    "kept/wrangler.toml": wrangler("kept"),
    "kept/worker.js": `const later = setTimeout;
const { queueMicrotask: soon } = globalThis;
export default {
  async fetch() {
    later(() => { throw new Error("kept timeout failed"); }, 1);
    soon(() => { throw new Error("kept microtask failed"); });
    await new Promise((resolve) => setTimeout(resolve, 20));
    return new Response("kept");
  },
};
`,
  });
  const running = await tidy.runHost([config], p.dataDir);
  expect(await (await running.fetch("/")).text()).toBe("kept");
  const text = await logOnceItShows(running, /worker\.js:5:25[^]*worker\.js:6:24|worker\.js:6:24[^]*worker\.js:5:25/, "both reports' frames");
  const js = `file://${p.dir}/kept/worker.js`;
  expect(text).toContain(`stderr: [celld] a setTimeout() callback threw: Error: kept timeout failed\nstderr:     at ${js}:5:25`);
  expect(text).toContain(`stderr: [celld] a queueMicrotask() callback threw: Error: kept microtask failed\nstderr:     at ${js}:6:24`);
  // The author's frame alone: none of the shim's.
  expect(text.split("stderr:     at ").length - 1).toBe(2);
});

// The replaced functions are the ones a Worker sees; whatever it reads of them is workerd's.
test("the replaced timer and listener functions have workerd's own lengths and names, in both kinds of Worker", async () => {
  const read = `const shape = () => ["setTimeout", "setInterval", "queueMicrotask", "addEventListener", "removeEventListener"]
  .map((name) => \`\${name}/\${globalThis[name].name}/\${globalThis[name].length}\`)
  .join(" ");
`;
  const sw = `${read}addEventListener("fetch", (event) => event.respondWith(new Response(shape())));\n`;
  const mod = `${read}export default { fetch: () => new Response(shape()) };\n`;
  const plain = new Miniflare({
    workers: [
      { name: "sw", script: sw, compatibilityDate: "2026-04-01" },
      { name: "mod", modules: true, script: mod, compatibilityDate: "2026-04-01" },
    ],
  });
  const expected: Record<string, string> = {};
  try {
    for (const name of ["sw", "mod"]) expected[name] = await (await (await plain.getWorker(name)).fetch("http://x/")).text();
  } finally {
    await plain.dispose();
  }
  const p = tidy.project();
  const configs = deployment(p, sw, mod);
  const running = await tidy.runHost(configs, p.dataDir);
  for (const name of ["sw", "mod"]) {
    const worker = await running.host.miniflare.getWorker(name);
    expect({ name, shape: await (await worker.fetch("http://x/")).text() }).toEqual({ name, shape: expected[name] });
  }
});
