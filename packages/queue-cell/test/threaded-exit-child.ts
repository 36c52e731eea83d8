/**
 * Child of threaded-registry.test.ts: opens cells on two threads, uses them, closes the registry
 * and returns, printing "closed". Its process must then exit by itself: a thread or a port left
 * behind would keep it alive.
 */
import { ThreadedCellRegistry } from "../src/index.ts";

const registry = new ThreadedCellRegistry({ dataDir: process.argv[2]!, threads: 2, durability: "off" });
for (const name of ["a", "b", "c", "d"]) {
  const cell = await registry.open(name);
  await cell.send([{ body: new Uint8Array(8), contentType: "bytes" }]);
  registry.hold(name);
  void cell.lease({ max: 10, waitSeconds: 20 });
  void cell.lease({ max: 10, waitSeconds: 20, signal: new AbortController().signal });
}
await registry.closeAll();
process.stdout.write("closed\n");
