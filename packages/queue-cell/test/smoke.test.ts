import { join } from "node:path";
import { expect, test } from "vitest";
import { ManualClock, QueueCell } from "../src/index.ts";
import { tempDir } from "./temp-dir.ts";

test("send, lease, ack round trip", async () => {
  const dir = tempDir();
  const clock = new ManualClock();
  const cell = new QueueCell({ name: "q", path: join(dir, "q.sqlite"), clock });
  const sent = await cell.send([{ body: new TextEncoder().encode("hi"), contentType: "text" }]);
  expect(sent.ids).toHaveLength(1);
  expect(sent.metrics.backlogCount).toBe(1);
  const leased = await cell.lease({ max: 10 });
  expect(leased.map((m) => m.id)).toEqual(sent.ids);
  const result = await cell.ack([{ id: leased[0]!.id, leaseGeneration: leased[0]!.leaseGeneration }]);
  expect(result.acked).toBe(1);
  expect((await cell.counts()).ready).toBe(0);
  await cell.close();
});
