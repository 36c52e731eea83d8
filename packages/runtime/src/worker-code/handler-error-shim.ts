/**
 * workerd tells the host little when a handler throws. For queue() run through Fetcher.queue the
 * host learns only the outcome "exception"; for fetch() on the Worker's own socket, workerd logs
 * the message with its own native stack, not the script's. So that a Worker author sees the error
 * and its JavaScript stack in the host's log, the Worker's entry is wrapped: its module is
 * re-exported unchanged, and the default export's fetch, queue and scheduled handlers print a
 * thrown error (console.error, which workerd passes to the host's stderr) and rethrow it, so the
 * response, the outcome and the retries are what they would have been. workerd says nothing at
 * all of a scheduled() handler's error (it only fails the event's outcome), of a rejected
 * ctx.waitUntil() promise, of a promise rejection nobody handled (wrangler dev shows it as
 * "Uncaught (in promise)") or of what a timer's callback throws (callbackReportingSource); the
 * shim prints those too. For a consumer Worker, the shim also says at load when the default export
 * has no queue() handler, and for a Worker with cron triggers when it has no scheduled() handler
 * (see missingHandlerWarning).
 */
import { callbackReportingSource, cronOfSource, errorReportingSource } from "./error-description-source.ts";
import { queueErrorWriter } from "./queue-error-record.ts";

/**
 * The reports, and the timer functions replaced (callbackReportingSource), in a module the shim
 * imports before the Worker's: a module, or a library it bundles, that keeps setTimeout or
 * queueMicrotask as it is loaded (`const later = setTimeout`) keeps the replacement. As a data:
 * URL, as the writer is; StackPositions drops its frames as the shim's own.
 */
const reportingModule = `data:text/javascript;base64,${Buffer.from(`// The Worker's console.error as it is at each report: a Worker that wraps it sees the reports.
const say = (text) => console.error(text);
${errorReportingSource}
const apply = Reflect.apply;
const target = globalThis;
${callbackReportingSource}
export { report, reportOnce, queueRecord };
`).toString("base64")}`;

/**
 * The named entrypoint a consumer's shim exports: its default export, wrapped, under a second
 * name. The queue dispatch Worker binds a consumer with [assets] through it, since Miniflare sends
 * a binding to such a Worker's default entrypoint into its asset router, which has no queue().
 */
export const queueEntrypointName = "__celld_queue";

/**
 * `consumer.token`: the Worker's queue-error token (QueueErrorMarks.issue). `uses`: the handlers
 * its config asks for (handlerUses), each warned of at load when the default export lacks it.
 */
export function handlerErrorShim(
  mainPath: string,
  consumer?: { worker: string; queues: readonly string[]; token: string },
  uses: readonly HandlerUse[] = [],
): string {
  const main = JSON.stringify(mainPath);
  // The writer first: ES modules run in the order imported, so it holds the built-ins before the
  // Worker's module can replace them.
  const writer = consumer === undefined ? "const writeRecord = undefined;" : `import writeRecord from ${JSON.stringify(queueErrorWriter(consumer.token))};`;
  return `${writer}
import { report, reportOnce, queueRecord } from ${JSON.stringify(reportingModule)};
import * as user from ${main};
export * from ${main};
const original = user.default;
// A queue() handler's error goes to the host as one line it reads (QueueErrorMarks in
// queue-error-record.ts), written under the Worker's token by writeRecord, not as the report
// itself: a consumer failing every batch would print it hundreds of times a second, and only the
// host, on its own clock, can print the first and count the rest.
// (A Worker the host runs as no consumer gets no writer; nothing calls its queue() handler.)
const reportQueueError = (batch, about, error) => {
  if (writeRecord === undefined) return report(\`\${about} threw\`, error);
  writeRecord(queueRecord(batch, \`\${about} threw\`, error));
};
${cronOfSource}
// A promise reported as unhandled may still be caught by the handler that made it (a fetch()
// started, then awaited in a try after other work): workerd then fires "rejectionhandled". So
// while a handler runs, a rejection is held, and printed when a handler settles only if nothing
// caught it by then; only errors that escaped are reported. With no handler running (a timer's
// callback after the response), nothing can still catch it: it is printed at once.
const unhandled = new Map();
let running = 0;
addEventListener("unhandledrejection", (event) => {
  if (running === 0) reportOnce("unhandled promise rejection", event.reason);
  else unhandled.set(event.promise, event.reason);
});
addEventListener("rejectionhandled", (event) => void unhandled.delete(event.promise));
const reportUnhandled = () => {
  for (const [promise, reason] of unhandled) {
    unhandled.delete(promise);
    reportOnce("unhandled promise rejection", reason);
  }
};
const what = {
  fetch: (request) => {
    try {
      return \`fetch() handler for \${request.method} \${new URL(request.url).pathname}\`;
    } catch {
      return "fetch() handler";
    }
  },
  queue: (batch) => \`queue() handler for "\${batch && batch.queue}"\`,
  scheduled: (controller) => \`scheduled() handler\${cronOf(controller)}\`,
};
// workerd waits for a waitUntil() promise and drops its rejection unseen (it is not an unhandled
// rejection: workerd handles it). The promise is watched, and still handed to workerd as it was.
// A rejection is printed once the handler has settled, so that an error the handler also throws
// is printed as the handler's. This runs for every request: it allocates one small object and the
// one function workerd needs, no promise. (Reflect.set: a context that refused the property
// would leave the Worker unwatched, not failing.)
class Invocation {
  constructor(h, arg) {
    this.h = h;
    this.arg = arg;
    this.settled = false;
    this.held = undefined;
    running++;
  }
  about() {
    return what[this.h](this.arg);
  }
  rejected(error) {
    if (this.settled) reportOnce(\`a ctx.waitUntil() promise of the \${this.about()} rejected\`, error);
    else (this.held ??= []).push(error);
  }
  settle() {
    this.settled = true;
    running--;
    reportUnhandled();
    if (this.held !== undefined) for (const error of this.held) this.rejected(error);
  }
}
const watchWaitUntil = (ctx, invocation) => {
  if (ctx === null || typeof ctx !== "object" || typeof ctx.waitUntil !== "function") return;
  const waitUntil = ctx.waitUntil;
  Reflect.set(ctx, "waitUntil", function (promise) {
    Promise.resolve(promise).catch((error) => invocation.rejected(error));
    return waitUntil.apply(this, arguments);
  });
};
const handlers = Object.keys(what);
// Whether the default export has handler h: on a class's prototype, or on an object.
const has = (h) =>
  typeof original === "function"
    ? !!original.prototype && typeof original.prototype[h] === "function"
    : original !== null && typeof original === "object" && typeof original[h] === "function";
// A handler that reports what it throws; run(self, args) calls the author's handler. The context
// is the handler's third argument, or a WorkerEntrypoint's this.ctx.
const reporting = (h, run) =>
  async function (...args) {
    const invocation = new Invocation(h, args[0]);
    watchWaitUntil(typeof original === "function" ? this.ctx : args[2], invocation);
    try {
      return await run(this, args);
    } catch (error) {
      if (h === "queue") reportQueueError(args[0], invocation.about(), error);
      else report(\`\${invocation.about()} threw\`, error);
      throw error;
    } finally {
      invocation.settle();
    }
  };
let wrapped = original;
if (typeof original === "function" && handlers.some(has)) {
  // A class default export (WorkerEntrypoint): a subclass with the same name, whose instances
  // are the author's class's own, private fields and all.
  wrapped = class extends original {};
  for (const h of handlers) {
    if (!has(h)) continue;
    Object.defineProperty(wrapped.prototype, h, {
      configurable: true,
      writable: true,
      value: reporting(h, (self, args) => original.prototype[h].apply(self, args)),
    });
  }
  Object.defineProperty(wrapped, "name", { value: original.name });
  // V8 names a method's stack frame by its receiver's constructor property: the author's class, so
  // that a frame reads "at Web.fetch", not "at wrapped.fetch" (and this.constructor is the author's).
  Object.defineProperty(wrapped.prototype, "constructor", { value: original, writable: true, configurable: true });
} else if (typeof original === "object" && handlers.some(has)) {
  // workerd reads the handlers off the export and calls them on it. A copy of the object would
  // lack a class instance's private fields, keep its getters' values from load time and hold
  // state apart from the author's object; so workerd gets a view of the author's object, whose
  // functions run on that object. The view's target is an empty object, not the author's, so
  // that the handlers of a frozen object can be handed out wrapped.
  // The functions handed out, made once for each function of the author's object (not at every
  // read: workerd reads a handler off the export for every request).
  const handedOut = new Map();
  wrapped = new Proxy({}, {
    getPrototypeOf: () => Object.getPrototypeOf(original),
    has: (_, key) => key in original,
    ownKeys: () => Reflect.ownKeys(original),
    getOwnPropertyDescriptor(_, key) {
      const own = Reflect.getOwnPropertyDescriptor(original, key);
      // Not the target's own: reported as configurable, as a proxy must.
      return own === undefined ? undefined : { ...own, configurable: true };
    },
    get(_, key) {
      const value = original[key];
      if (typeof value !== "function") return value;
      let given = handedOut.get(key);
      if (given === undefined || given.value !== value) {
        const run = (_, args) => value.apply(original, args);
        given = { value, fn: handlers.includes(key) ? reporting(key, run) : (...args) => value.apply(original, args) };
        handedOut.set(key, given);
      }
      return given.fn;
    },
  });
}
export default wrapped;
${consumer === undefined || consumer.queues.length === 0 ? "" : `export { wrapped as ${queueEntrypointName} };\n`}${uses.map(missingHandlerWarning).join("")}`;
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
  return `if (!has(${JSON.stringify(use.handler)})) console.error(${JSON.stringify(text)});
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
