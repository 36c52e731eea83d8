/**
 * The module Worker's handler shim, run inside workerd (handler-error-shim.ts generates the entry
 * that imports it with the Worker's main). workerd tells the host little when a handler throws: for
 * queue() run through Fetcher.queue only the outcome "exception"; for fetch() on the Worker's own
 * socket, the message with workerd's native stack, not the script's. So the default export's
 * fetch, queue and scheduled handlers print a thrown error (console.error, which workerd passes to
 * the host's stderr) and rethrow it, so the response, the outcome and the retries are what they
 * would have been. workerd says nothing at all of a scheduled() handler's error, of a rejected
 * ctx.waitUntil() promise, of a promise rejection nobody handled or of what a timer's callback
 * throws; the shim prints those too.
 *
 * Worker-side code: it imports nothing from Node and typechecks against @cloudflare/workers-types
 * (packages/runtime/tsconfig.worker.json). It reaches the Worker as a data: URL module
 * (worker-code-bundles.ts), imported before the Worker's own, whose frames StackPositions drops.
 */
import { createReports, cronOf, reportCallbackErrors } from "./error-reports.worker.ts";

type Handler = "fetch" | "queue" | "scheduled";
type AnyFunction = (...args: unknown[]) => unknown;
/** The queue-error writer (queueErrorWriter in queue-error-record.ts); undefined for no consumer. */
export type RecordWriter = ((record: unknown) => void) | undefined;

// The Worker's console.error as it is at each report: a Worker that wraps it sees the reports.
const { report, reportOnce, queueRecord } = createReports((text) => console.error(text));
// At load, before the Worker's module: one that keeps setTimeout as it is loaded
// (`const later = setTimeout`) keeps the replacement.
reportCallbackErrors(globalThis, Reflect.apply, reportOnce);

const handlers: readonly Handler[] = ["fetch", "queue", "scheduled"];

const what: Record<Handler, (arg: unknown) => string> = {
  fetch: (request) => {
    try {
      const r = request as Request;
      return `fetch() handler for ${r.method} ${new URL(r.url).pathname}`;
    } catch {
      return "fetch() handler";
    }
  },
  queue: (batch) => `queue() handler for "${batch && (batch as { queue?: unknown }).queue}"`,
  scheduled: (controller) => `scheduled() handler${cronOf(controller)}`,
};

// A promise reported as unhandled may still be caught by the handler that made it (a fetch()
// started, then awaited in a try after other work): workerd then fires "rejectionhandled". So
// while a handler runs, a rejection is held, and printed when a handler settles only if nothing
// caught it by then; only errors that escaped are reported. With no handler running (a timer's
// callback after the response), nothing can still catch it: it is printed at once.
const unhandled = new Map<Promise<unknown>, unknown>();
let running = 0;

/** Called by the entry once the Worker's module has loaded. */
export function watchUnhandledRejections(): void {
  addEventListener("unhandledrejection", (event) => {
    if (running === 0) reportOnce("unhandled promise rejection", event.reason);
    else unhandled.set(event.promise, event.reason);
  });
  addEventListener("rejectionhandled", (event) => void unhandled.delete(event.promise));
}

function reportUnhandled(): void {
  for (const [promise, reason] of unhandled) {
    unhandled.delete(promise);
    reportOnce("unhandled promise rejection", reason);
  }
}

/** Whether the default export has handler h: on a class's prototype, or on an object. */
export function hasHandler(original: unknown, h: string): boolean {
  if (typeof original === "function") {
    const prototype = (original as { prototype?: Record<string, unknown> }).prototype;
    return !!prototype && typeof prototype[h] === "function";
  }
  return original !== null && typeof original === "object" && typeof (original as Record<string, unknown>)[h] === "function";
}

// workerd waits for a waitUntil() promise and drops its rejection unseen (it is not an unhandled
// rejection: workerd handles it). The promise is watched, and still handed to workerd as it was.
// A rejection is printed once the handler has settled, so that an error the handler also throws
// is printed as the handler's. This runs for every request: it allocates one small object and the
// one function workerd needs, no promise.
class Invocation {
  private settled = false;
  private held: unknown[] | undefined;
  constructor(
    private readonly h: Handler,
    private readonly arg: unknown,
  ) {
    running++;
  }
  about(): string {
    return what[this.h](this.arg);
  }
  rejected(error: unknown): void {
    if (this.settled) reportOnce(`a ctx.waitUntil() promise of the ${this.about()} rejected`, error);
    else (this.held ??= []).push(error);
  }
  settle(): void {
    this.settled = true;
    running--;
    reportUnhandled();
    if (this.held !== undefined) for (const error of this.held) this.rejected(error);
  }
}

// (Reflect.set: a context that refused the property would leave the Worker unwatched, not failing.)
function watchWaitUntil(ctx: unknown, invocation: Invocation): void {
  if (ctx === null || typeof ctx !== "object" || typeof (ctx as ExecutionContext).waitUntil !== "function") return;
  const waitUntil = (ctx as ExecutionContext).waitUntil;
  Reflect.set(ctx, "waitUntil", function (this: unknown, promise: unknown) {
    Promise.resolve(promise).catch((error: unknown) => invocation.rejected(error));
    // eslint-disable-next-line prefer-rest-params -- workerd's own arguments, as they came
    return Reflect.apply(waitUntil, this, arguments);
  });
}

/**
 * The default export with handlers that report what they throw. A queue() handler's error goes to
 * the host as one line it reads, written under the Worker's token by writeRecord, not as the report
 * itself: a consumer failing every batch would print it hundreds of times a second, and only the
 * host, on its own clock, can print the first and count the rest. (A Worker the host runs as no
 * consumer gets no writer; nothing calls its queue() handler.)
 */
export function wrapDefault(original: unknown, writeRecord: RecordWriter): unknown {
  const reportQueueError = (batch: unknown, about: string, error: unknown): void => {
    if (writeRecord === undefined) return report(`${about} threw`, error);
    writeRecord(queueRecord(batch, `${about} threw`, error));
  };
  // run(self, args) calls the author's handler. The context is the handler's third argument, or a
  // WorkerEntrypoint's this.ctx.
  const reporting = (h: Handler, run: (self: unknown, args: unknown[]) => unknown) =>
    async function (this: { ctx?: unknown }, ...args: unknown[]) {
      const invocation = new Invocation(h, args[0]);
      watchWaitUntil(typeof original === "function" ? this.ctx : args[2], invocation);
      try {
        return await run(this, args);
      } catch (error) {
        if (h === "queue") reportQueueError(args[0], invocation.about(), error);
        else report(`${invocation.about()} threw`, error);
        throw error;
      } finally {
        invocation.settle();
      }
    };
  if (!handlers.some((h) => hasHandler(original, h))) return original;
  if (typeof original === "function") return wrappedClass(original as new (...args: unknown[]) => object, reporting);
  if (typeof original === "object") return wrappedObject(original as Record<PropertyKey, unknown>, reporting);
  return original;
}

type Reporting = (h: Handler, run: (self: unknown, args: unknown[]) => unknown) => AnyFunction;

/**
 * A class default export (WorkerEntrypoint): a subclass with the same name, whose instances are the
 * author's class's own, private fields and all.
 */
function wrappedClass(original: new (...args: unknown[]) => object, reporting: Reporting): unknown {
  const wrapped = class extends original {};
  const own = original.prototype as Record<string, AnyFunction>;
  for (const h of handlers) {
    if (!hasHandler(original, h)) continue;
    Object.defineProperty(wrapped.prototype, h, {
      configurable: true,
      writable: true,
      value: reporting(h, (self, args) => own[h]!.apply(self, args)),
    });
  }
  Object.defineProperty(wrapped, "name", { value: original.name });
  // V8 names a method's stack frame by its receiver's constructor property: the author's class, so
  // that a frame reads "at Web.fetch", not "at wrapped.fetch" (and this.constructor is the author's).
  Object.defineProperty(wrapped.prototype, "constructor", { value: original, writable: true, configurable: true });
  return wrapped;
}

/**
 * workerd reads the handlers off the export and calls them on it. A copy of the object would lack
 * a class instance's private fields, keep its getters' values from load time and hold state apart
 * from the author's object; so workerd gets a view of the author's object, whose functions run on
 * that object. The view's target is an empty object, not the author's, so that the handlers of a
 * frozen object can be handed out wrapped. The functions handed out are made once for each
 * function of the author's object (not at every read: workerd reads a handler off the export for
 * every request).
 */
function wrappedObject(original: Record<PropertyKey, unknown>, reporting: Reporting): unknown {
  const handedOut = new Map<PropertyKey, { value: AnyFunction; fn: AnyFunction }>();
  return new Proxy(
    {},
    {
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
          const fn = value as AnyFunction;
          const run = (_self: unknown, args: unknown[]) => fn.apply(original, args);
          given = { value: fn, fn: handlers.includes(key as Handler) ? reporting(key as Handler, run) : (...args: unknown[]) => fn.apply(original, args) };
          handedOut.set(key, given);
        }
        return given.fn;
      },
    },
  );
}
