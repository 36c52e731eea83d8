import { expect, test } from "vitest";
import { CellRegistry } from "../packages/queue-cell/src/index.ts";
import { tidyAfterEach } from "./host-harness.ts";

// tidyAfterEach closes every host again after each test: a third close, which must pass too.
const { project, runHost } = tidyAfterEach();

function app(): { dataDir: string; config: string } {
  const p = project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\n`,
    "worker.js": "export default { async fetch(req, env) { await env.JOBS.send(1); return new Response('ok'); } };",
  });
  return { dataDir: p.dataDir, config };
}

test("a second close() waits for the first and resolves as it does; one made later resolves too", async () => {
  const { dataDir, config } = app();
  const running = await runHost([config], dataDir);
  expect(await (await running.fetch("/")).text()).toBe("ok");
  const first = running.host.close(50);
  const second = running.host.close();
  // Only the second is awaited: once it resolves, the first close has let go of the data
  // directory, so a new host starts on it at once.
  await second;
  const again = await runHost([config], dataDir);
  await first;
  expect(await (await again.fetch("/")).text()).toBe("ok");
  // A close of the old host now must not touch what the new one holds (its lock, its cells).
  await running.host.close();
  expect(await (await again.fetch("/")).text()).toBe("ok");
  expect((await (await again.cell("jobs")).counts()).ready).toBe(3);
});

test("a close made the moment start resolves, with a batch being handed to the consumer, loses nothing and leaves nothing running", async () => {
  const p = project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"
queues.producers = [{ binding = "JOBS", queue = "jobs" }]
queues.consumers = [{ queue = "jobs", max_batch_size = 1, max_batch_timeout = 0 }]\n`,
    "worker.js": "export default { async queue(batch) { await new Promise((r) => setTimeout(r, 200)); } };",
  });
  // Messages that wait in the queue when the host starts: its consumer leases one at once.
  const first = await runHost([config], p.dataDir);
  await (await first.cell("jobs")).send([1, 2, 3].map((n) => ({ body: new TextEncoder().encode(String(n)), contentType: "json" })));
  await first.host.close();
  const second = await runHost([config], p.dataDir);
  await Promise.all([second.host.close(), second.host.close()]);
  // Read with no host running: a consumer of a new host would lease again at once.
  const registry = new CellRegistry({ dataDir: p.dataDir });
  try {
    const counts = await (await registry.open("jobs")).counts();
    // Each message is acked by a batch that finished in time, or handed back to the queue: none
    // is left leased by the host that has gone, or dead.
    expect(counts.leased + counts.dead).toBe(0);
    expect(counts.ready).toBeLessThanOrEqual(3);
  } finally {
    await registry.closeAll();
  }
});
