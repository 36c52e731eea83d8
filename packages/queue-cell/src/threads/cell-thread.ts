import { parentPort, workerData } from "node:worker_threads";
import { adoptSystemClockOrigin } from "../clock.ts";
import { CellThreadServer } from "./cell-thread-server.ts";
import type { CellThreadParameters } from "./protocol.ts";

// A cell thread's program (started by ThreadLink through cell-thread.mjs): it serves its port
// until the main thread terminates it.
if (parentPort === null) throw new Error("cell-thread.ts runs as a worker thread (ThreadedCellRegistry starts it)");
const parameters = workerData as CellThreadParameters;
// Before any cell reads the clock: a cell's times are compared with the main thread's.
adoptSystemClockOrigin(parameters.clockOrigin);
new CellThreadServer(parentPort, parameters);
