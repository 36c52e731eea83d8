import { chmodSync, mkdirSync, statSync } from "node:fs";
import { expect, test } from "vitest";
import { tidyAfterEach } from "./host-harness.ts";

const { project, runHost } = tidyAfterEach();

function app(): { dataDir: string; config: string } {
  const p = project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\n`,
    "worker.js": "export default { async fetch() { return new Response('ok'); } };",
  });
  return { dataDir: p.dataDir, config };
}

test("a data directory an older celld left open to others (0755) is named in one warning at start, and its mode left alone", async () => {
  const { dataDir, config } = app();
  mkdirSync(dataDir);
  chmodSync(dataDir, 0o755);
  const running = await runHost([config], dataDir);
  expect(running.log.lines.filter((line) => line.startsWith("warn:"))).toEqual([
    `warn: the data directory ${dataDir} is mode 0755: every local user may read what is in it ` +
      `(the Workers' KV, D1, R2 and Durable Object data); make it this user's alone with: chmod 700 ${dataDir}`,
  ]);
  expect(statSync(dataDir).mode & 0o777).toBe(0o755);
});

test("a data directory celld creates gets no such warning", async () => {
  const { dataDir, config } = app();
  const running = await runHost([config], dataDir);
  expect(running.log.lines.filter((line) => line.startsWith("warn:"))).toEqual([]);
});
