import { expect, test } from "vitest";
import type { Cell } from "@celld/queue-cell";
import { tidyAfterEach } from "./host-harness.ts";

const { project, runHost } = tidyAfterEach();

/** Once the cell's opening work has run, an idle cell is one the bound may close (no timers). */
async function idle(cell: Cell): Promise<void> {
  for (let turn = 0; cell.idleSince() === undefined; turn++) {
    if (turn > 1_000) throw new Error("the cell never became idle");
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test("the host keeps open only the cells that fit half the open-files limit, and says so once", async () => {
  const p = project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\nqueues.producers = [{ binding = "JOBS", queue = "jobs" }]\n`,
    "worker.js": "export default { async fetch() { return new Response('ok'); } };",
  });
  // 40 descriptors: half of them, at 5 a cell, is 4 cells.
  const running = await runHost([config], p.dataDir, { openFilesLimit: 40, connectionsMax: 8 });
  expect(running.log.lines.filter((line) => line.includes("open-files limit"))).toEqual([
    "info: the open-files limit is 40, so at most 4 queues stay open at once, not 1000 (each holds about 5 descriptors; " +
      "idle ones close and reopen on use); to keep more open, raise the limit: ulimit -n before celld, or LimitNOFILE= in its systemd unit",
  ]);
  for (let i = 0; i < 6; i++) await idle(await running.cell(`extra-${i}`));
  expect(running.host.registry.openNames()).toHaveLength(4);
  expect(running.host.registry.openNames()).toContain("extra-5");
});

test("under a limit with room for openCellsMax cells nothing is said", async () => {
  const p = project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n`,
    "worker.js": "export default { async fetch() { return new Response('ok'); } };",
  });
  const running = await runHost([config], p.dataDir, { openFilesLimit: 1_048_576 });
  expect(running.log.lines.filter((line) => line.includes("open-files limit"))).toEqual([]);
});

test("more consumed queues than the bound allows is warned of at start, with the limit to raise to", async () => {
  const p = project();
  const queues = ["a", "b", "c", "d", "e"];
  const config = p.write({
    "wrangler.toml":
      `name = "app"\nmain = "worker.js"\ncompatibility_date = "2026-04-01"\n` +
      `queues.consumers = [${queues.map((q) => `{ queue = "${q}" }`).join(", ")}]\n`,
    "worker.js": "export default { async fetch() { return new Response('ok'); }, async queue() {} };",
  });
  // 40 descriptors: room for 4 open queues; the five consumed ones stay open regardless.
  const running = await runHost([config], p.dataDir, { openFilesLimit: 40, connectionsMax: 8 });
  expect(running.log.lines.filter((line) => line.startsWith("warn: ") && line.includes("open-files limit"))).toEqual([
    "warn: 5 queues have consumers, which keep them open, but the open-files limit of 40 leaves room for 4: celld may run " +
      "out of descriptors, and sends then fail; raise the limit to at least 50: ulimit -n before celld, or LimitNOFILE= in its systemd unit",
  ]);
  expect(running.host.registry.openNames()).toHaveLength(5);
});
