import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { expect, test } from "vitest";
import { childProcessesOf, eventually, tidyAfterEach, type RunningHost } from "./host-harness.ts";

const tidy = tidyAfterEach();

// Restarts wait on the host's clock (a ManualClock here): the test says when the wait is over.

function app() {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "index.js"
compatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 10, max_batch_timeout = 0 }]
`,
    "index.js": `export default {
  async fetch(request, env) {
    const n = Number(new URL(request.url).searchParams.get("n") ?? "0");
    await env.JOBS.send({ n });
    return new Response("sent " + n);
  },
  async queue(batch) { batch.ackAll(); },
};`,
  });
  return { p, config };
}

function killWorkerd(): number[] {
  const pids = childProcessesOf(process.pid)
    .filter((c) => c.name.startsWith("workerd"))
    .map((c) => c.pid);
  expect(pids.length).toBeGreaterThan(0);
  for (const pid of pids) process.kill(pid, "SIGKILL");
  return pids;
}

const lineWith = (h: RunningHost, text: string) => () => h.log.lines.find((l) => l.includes(text));

test.runIf(process.platform === "linux")(
  "workerd killed: started again on the same port after its backoff, the Worker serves and batches run again",
  async () => {
    const { p, config } = app();
    const h = await tidy.runHost([config], p.dataDir);
    const url = h.host.url.href;
    expect(await (await h.fetch("/?n=1")).text()).toBe("sent 1");
    await eventually(() => h.batches.find((b) => b.acked === 1), "the first batch");

    const killed = killWorkerd();
    const said = await eventually(lineWith(h, "starting it again in 250 ms"), "the exit line");
    expect(said).toContain("workerd (the Workers runtime) exited unexpectedly (killed by SIGKILL (9)): starting it again in 250 ms");
    expect(h.host.runtime.stats).toMatchObject({ exits: 1, restarts: 0, lastExit: { cause: "exited unexpectedly (killed by SIGKILL (9))" } });
    // Not before the backoff is over.
    h.clock.advance(249);
    await new Promise((r) => setTimeout(r, 100));
    expect(childProcessesOf(process.pid).filter((c) => c.name.startsWith("workerd"))).toHaveLength(0);
    h.clock.advance(1);
    await eventually(lineWith(h, "started again (restart 1): the Workers serve again"), "the restart", 30_000);
    expect(h.host.runtime.stats).toMatchObject({ exits: 1, restarts: 1, failedRestarts: 0 });
    const now = childProcessesOf(process.pid).filter((c) => c.name.startsWith("workerd"));
    expect(now.length).toBeGreaterThan(0);
    expect(now.some((c) => killed.includes(c.pid))).toBe(false);
    // The guard that stops workerd if celld is killed watches the new one.
    const record = JSON.parse(readFileSync(join(p.dataDir, "workerd.pid"), "utf8")) as { pid: number }[];
    expect(record.map((r) => r.pid).sort()).toEqual(now.map((c) => c.pid).sort());

    // The same URL, and the consumer takes batches again at once (no wait left from the outage).
    expect(h.host.url.href).toBe(url);
    expect(await (await fetch(new URL("/?n=2", url))).text()).toBe("sent 2");
    await eventually(() => h.batches.find((b) => b.acked === 1 && b !== h.batches[0]), "a batch after the restart");
    expect(await (await h.cell("jobs")).counts()).toMatchObject({ ready: 0, leased: 0 });
  },
  60_000,
);

test.runIf(process.platform === "linux")(
  "five exits within a minute: no restart after the fifth, and the host is told why",
  async () => {
    const { p, config } = app();
    const reasons: string[] = [];
    const h = await tidy.runHost([config], p.dataDir, { onRuntimeExit: (reason) => reasons.push(reason) });
    const delays = [250, 500, 1_000, 2_000];
    for (const [i, delay] of delays.entries()) {
      killWorkerd();
      await eventually(lineWith(h, `starting it again in ${delay} ms (failure ${i + 1} within a minute)`), `exit ${i + 1}`);
      h.clock.advance(delay);
      await eventually(lineWith(h, `(restart ${i + 1})`), `restart ${i + 1}`, 30_000);
    }
    expect(reasons).toEqual([]);
    killWorkerd();
    const reason = await eventually(() => reasons[0], "the host told");
    expect(reason).toContain(
      "workerd (the Workers runtime) exited unexpectedly (killed by SIGKILL (9)), its failure 5 within 60 s: celld stops rather than start it again",
    );
    expect(h.log.lines.filter((l) => l.includes("celld stops rather than start it again"))).toHaveLength(1);
    expect(h.host.runtime.stats).toMatchObject({ exits: 5, restarts: 4 });
    h.clock.advance(60_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(childProcessesOf(process.pid).filter((c) => c.name.startsWith("workerd"))).toHaveLength(0);
  },
  120_000,
);

test.runIf(process.platform === "linux")(
  "a restart that fails (its port taken meanwhile) counts as a failure, and the next one brings the Workers back",
  async () => {
    const { p, config } = app();
    const h = await tidy.runHost([config], p.dataDir);
    // The port workerd itself listens on for the Worker (the front door on h.host.url is celld's
    // own and outlives workerd); a restart asks for it again.
    const port = Number((await h.host.miniflare.unsafeGetDirectURL("app")).port);
    killWorkerd();
    await eventually(lineWith(h, "starting it again in 250 ms"), "the exit line");
    // Whoever takes the port while workerd is down.
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, "127.0.0.1", resolve));
    try {
      h.clock.advance(250);
      await eventually(lineWith(h, "could not be started again: starting it again in 500 ms (failure 2 within a minute)"), "the failed restart", 30_000);
      expect(h.host.runtime.stats).toMatchObject({ exits: 1, restarts: 0, failedRestarts: 1 });
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
    h.clock.advance(500);
    await eventually(lineWith(h, "started again (restart 1)"), "the restart", 30_000);
    expect(await (await h.fetch("/?n=3")).text()).toBe("sent 3");
  },
  60_000,
);
