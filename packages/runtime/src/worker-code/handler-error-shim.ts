/**
 * The module Worker's handler shim as the host puts it into a Worker: the generated entry (its few
 * parameters) around module-shim.worker.ts, which says what the shim does and why; and the host's
 * own warnings for a Worker whose config asks for a handler it does not have.
 */
import { queueErrorWriter } from "./queue-error-record.ts";
import { moduleShimUrl } from "./worker-code-bundles.ts";

/**
 * The named entrypoint a Worker's shim exports: its default export, wrapped, under a second
 * name. The queue dispatch Worker binds a consumer with [assets] through it, since Miniflare sends
 * a binding to such a Worker's default entrypoint into its asset router, which has no queue().
 */
export const queueEntrypointName = "__celld_queue";

/**
 * The entry module of a shimmed module Worker: the Worker's module re-exported unchanged, its
 * default export wrapped by module-shim.worker.ts. `consumer.token`: the Worker's queue-error token
 * (QueueErrorMarks.issue). `uses`: the handlers its config asks for (handlerUses), each warned of at
 * load when the default export lacks it. Only these parameters are generated here.
 */
export function handlerErrorShim(
  mainPath: string,
  consumer?: { worker: string; queues: readonly string[]; token: string },
  uses: readonly HandlerUse[] = [],
): string {
  const main = JSON.stringify(mainPath);
  // The writer first, then the shim: ES modules run in the order imported, so they hold the
  // built-ins (and replace the timer functions) before the Worker's module can replace them.
  const writer = consumer === undefined ? "const writeRecord = undefined;" : `import writeRecord from ${JSON.stringify(queueErrorWriter(consumer.token))};`;
  // Every shimmed Worker, not only the config's consumers: one may become a consumer through the
  // API while it runs, and the dispatch Worker's bindings are fixed when workerd starts.
  const queueExport = consumer === undefined ? "" : `export { wrapped as ${queueEntrypointName} };\n`;
  return `${writer}
import { hasHandler, watchUnhandledRejections, wrapDefault } from ${JSON.stringify(moduleShimUrl())};
import * as user from ${main};
export * from ${main};
watchUnhandledRejections();
const wrapped = wrapDefault(user.default, writeRecord);
export default wrapped;
${queueExport}${uses.map(missingHandlerWarning).join("")}`;
}

/**
 * What a Worker's config asks of one of its handlers: a queue() for the queues it consumes, a
 * scheduled() for its cron triggers. A Worker without that handler still deploys, and workerd
 * then fails each batch ("we lack a handler for QueueEvents") or each cron run, saying so only
 * once one has failed; so the shim and the host say it at start.
 */
export interface HandlerUse {
  worker: string;
  handler: "queue" | "scheduled";
  /** How the line says what the config asks: `consumes "jobs"`, `has cron triggers ("0 * * * *")`. */
  asks: string;
  consequence: string;
}

/** The Worker's uses of its handlers, those its config makes: none, one, or both. */
export function handlerUses(worker: string, queues: readonly string[], crons: readonly string[]): HandlerUse[] {
  const uses: HandlerUse[] = [];
  if (queues.length > 0) {
    uses.push({
      worker,
      handler: "queue",
      asks: `consumes ${named(queues)}`,
      consequence: "every batch will fail, and its messages be retried, then dead-lettered or deleted",
    });
  }
  if (crons.length > 0) {
    uses.push({ worker, handler: "scheduled", asks: `has cron triggers (${named(crons)})`, consequence: "every run of them will fail" });
  }
  return uses;
}

/** Said by the shim as the Worker's module is loaded, when the default export lacks the handler. */
function missingHandlerWarning(use: HandlerUse): string {
  const text = `[celld] warning: Worker "${use.worker}" ${use.asks} but its default export has no ${use.handler}() handler: ${use.consequence}`;
  return `if (!hasHandler(user.default, ${JSON.stringify(use.handler)})) console.error(${JSON.stringify(text)});
`;
}

/** The same warning for a service-worker script that adds no listener for the event (see addsListener). */
export function noListenerWarning(use: HandlerUse, mainPath: string): string {
  return (
    `Worker "${use.worker}" ${use.asks} but its script ${mainPath} adds no "${use.handler}" event listener ` +
    `(addEventListener("${use.handler}", ...)): ${use.consequence}`
  );
}

/** The same warning for a module Worker with no default export at all, which gets no shim. */
export function noDefaultExportWarning(use: HandlerUse): string {
  return `Worker "${use.worker}" ${use.asks} but has no default export, so no ${use.handler}() handler: ${use.consequence}`;
}

const named = (queues: readonly string[]): string => queues.map((q) => `"${q}"`).join(", ");
