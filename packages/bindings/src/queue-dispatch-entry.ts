import { fileURLToPath } from "node:url";

/**
 * The queue dispatch Worker's entry module, for a host to bundle (with esbuild, as it bundles any
 * Worker) and run in workerd. A path rather than source text: the Worker imports batch-wire.ts and
 * consumer-message.ts, so it decodes with the very code the unit tests check.
 */
export const queueDispatchWorkerEntry = fileURLToPath(new URL("./queue-dispatch.worker.ts", import.meta.url));
