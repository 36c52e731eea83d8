/**
 * Every benchmark, one after another: `npm run bench`. Each prints absolute figures and a ratio
 * against a baseline measured in the same run. Not a test: nothing here fails on a slow machine.
 */
import { runCellBench } from "../packages/queue-cell/bench/cell-bench.ts";

const only = process.argv[2];
if (only === undefined || only === "cell") await runCellBench();
