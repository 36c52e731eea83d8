import { expect, test } from "vitest";
import { dataDirLine } from "../src/cli/data-dir-line.ts";

test("the banner's data directory line counts the queue files and gives their size in decimal units", () => {
  const line = (queues: number, bytes: number) => dataDirLine("/x/.celld", { queues, bytes });
  expect(line(12, 48_123_456)).toBe("data directory: /x/.celld (12 queues on disk, 48 MB)");
  expect(line(1, 4096)).toBe("data directory: /x/.celld (1 queue on disk, 4.1 KB)");
  expect(line(3, 999)).toBe("data directory: /x/.celld (3 queues on disk, 999 B)");
  expect(line(2, 1_000_000)).toBe("data directory: /x/.celld (2 queues on disk, 1.0 MB)");
  expect(line(9_000, 250_400_000_000)).toBe("data directory: /x/.celld (9000 queues on disk, 250 GB)");
  expect(line(0, 0)).toBe("data directory: /x/.celld (no queues on disk)");
});

test("queue files no config of the deployment names are counted in the line, so that it adds up with the queues line", () => {
  expect(dataDirLine("/x/.celld", { queues: 4, bytes: 140_000 }, 2)).toBe(
    "data directory: /x/.celld (4 queues on disk, 140 KB; 2 of them in no config of this deployment, kept as they are)",
  );
  expect(dataDirLine("/x/.celld", { queues: 2, bytes: 140_000 }, 0)).toBe("data directory: /x/.celld (2 queues on disk, 140 KB)");
});
