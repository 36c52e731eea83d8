/**
 * Every benchmark, one after another: `npm run bench`; one of them: `npm run bench cell`,
 * `npm run bench host`, `npm run bench api`, `npm run bench memory` (`many-queues`: its second part alone), `npm run bench front`,
 * `npm run bench deploy` (the real wrangler against celld serve), `npm run bench threads` (cells on
 * worker threads; `threads-host`: the same through workerd). Each prints absolute
 * figures and a ratio against a baseline measured in the same run. Not a test: nothing here fails
 * on a slow machine.
 */
import { runCellBench } from "../packages/queue-cell/bench/cell-bench.ts";
import { runApiBench } from "./api-bench.ts";
import { runDeployBench } from "./deploy-bench.ts";
import { runFrontDoorBench } from "./front-door.ts";
import { runHostBench } from "./host-bench.ts";
import { runManyQueuesBench } from "./many-queues-bench.ts";
import { runMemoryBench } from "./memory-bench.ts";
import { runThreadsBench, threadsBenchOptions } from "./threads-bench.ts";
import { runThreadsHostBench } from "./threads-host-bench.ts";

const benches: Record<string, () => Promise<void>> = {
  cell: () => runCellBench(),
  host: () => runHostBench(),
  api: async () => (await runApiBench()).forEach((line) => console.log(line)),
  memory: async () => {
    await runMemoryBench();
    await runManyQueuesBench();
  },
  "many-queues": () => runManyQueuesBench(),
  // The front door's part of `host` alone (also in `host`, every round).
  front: () => runFrontDoorBench(),
  // wrangler deploy to celld serve under load beside celld dev's restart (issue #32).
  deploy: () => runDeployBench(),
  // Cells on worker threads vs on the main thread over 1, 2 and 4 queues (issue #34); -- --threads N.
  threads: () => runThreadsBench(threadsBenchOptions(process.argv.slice(3))),
  // The same through the whole host: Workers in workerd producing and consuming.
  "threads-host": () => runThreadsHostBench(threadsBenchOptions(process.argv.slice(3))),
};
const only = process.argv[2];
if (only !== undefined && !Object.hasOwn(benches, only)) {
  console.error(`no bench named "${only}"; there are: ${Object.keys(benches).join(", ")}`);
  process.exitCode = 2;
} else {
  for (const [name, run] of Object.entries(benches)) if (only === undefined || only === name) await run();
}
