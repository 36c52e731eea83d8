import { expect, test } from "vitest";
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
