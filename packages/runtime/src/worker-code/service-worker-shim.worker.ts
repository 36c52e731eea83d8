/**
 * A service-worker script's handler shim (no exports; addEventListener), run inside workerd before
 * the script's first line (service-worker-shim.ts puts it there with its parameters). It gives what
 * a module Worker's shim gives (module-shim.worker.ts): what its "fetch", "queue" and "scheduled"
 * listeners throw, a rejected event.respondWith() or event.waitUntil() promise, a rejection nobody
 * handled and what a timer's or a microtask's callback throws are printed with the script's own
 * stack, through the console.error the shim held at start. A "queue" listener's error goes to the
 * host as a record under the Worker's token (queue-error-record.ts). In a service-worker script a
 * rejected event.waitUntil() promise fails the batch (workerd waits for it to give the outcome), so
 * for a "queue" listener it is the batch's error, a record.
 *
 * Worker-side code: it imports nothing from Node and typechecks against @cloudflare/workers-types
 * (packages/runtime/tsconfig.worker.json).
 */
import { createReports, cronOf, replaceInChain, reportCallbackErrors } from "./error-reports.worker.ts";

type ListenerType = "fetch" | "queue" | "scheduled";
type AnyFunction = (...args: unknown[]) => unknown;
type Listener = AnyFunction | { handleEvent: AnyFunction };

/**
 * Installs the shim. `marker` starts a queue record's line (undefined for a script that consumes
 * no queue); the rest are the built-ins as workerd made them, taken before the script runs.
 */
export default function installServiceWorkerShim(
  marker: string | undefined,
  write: AnyFunction,
  apply: typeof Reflect.apply,
  stringify: typeof JSON.stringify,
  output: Console,
  target: typeof globalThis,
  add: AnyFunction,
): void {
  const say = (text: string): void => void apply(write, output, [text]);
  const { report, reportOnce, queueRecord, printed } = createReports(say);
  reportCallbackErrors(target, apply, reportOnce);
  // Written as one line the host reads under the Worker's token.
  const reportQueueError = (event: unknown, lead: string, error: unknown): void => {
    if (marker === undefined) return report(lead, error);
    say(marker + stringify(queueRecord(event, lead, error)));
  };
  const rejections = new HeldRejections((reason) => reportOnce("unhandled promise rejection", reason));
  apply(add, target, ["unhandledrejection", (event: PromiseRejectionEvent) => rejections.unhandled(event.promise, event.reason)]);
  apply(add, target, ["rejectionhandled", (event: PromiseRejectionEvent) => rejections.handled(event.promise)]);
  const listening = (type: ListenerType, listener: Listener) =>
    function (this: unknown, event: unknown) {
      const about = () => what[type](event);
      const run = rejections.start();
      if (type === "queue") {
        watch(event, "waitUntil", apply, run, (error) => {
          if (!printed(error)) reportQueueError(event, `an event.waitUntil() promise of the ${about()} rejected`, error);
        });
      } else {
        if (type === "fetch") watch(event, "respondWith", apply, run, (error) => reportOnce(`the event.respondWith() promise of the ${about()} rejected`, error));
        watch(event, "waitUntil", apply, run, (error) => reportOnce(`an event.waitUntil() promise of the ${about()} rejected`, error));
      }
      try {
        return typeof listener === "function" ? apply(listener, this, [event]) : apply(listener.handleEvent, listener, [event]);
      } catch (error) {
        if (type === "queue") reportQueueError(event, `${about()} threw`, error);
        else report(`${about()} threw`, error);
        throw error;
      } finally {
        run.returned();
      }
    };
  // The same listener added twice is one listener, and removing it removes it: one wrapper for each.
  const wrappers: Record<ListenerType, WeakMap<object, AnyFunction>> = { fetch: new WeakMap(), queue: new WeakMap(), scheduled: new WeakMap() };
  const wrapperOf = (type: unknown, listener: unknown): unknown => {
    const byListener = typeof type === "string" && Object.hasOwn(wrappers, type) ? wrappers[type as ListenerType] : undefined;
    if (byListener === undefined || listener === null || (typeof listener !== "function" && typeof listener !== "object")) return listener;
    let wrapper = byListener.get(listener);
    if (wrapper === undefined) byListener.set(listener, (wrapper = listening(type as ListenerType, listener as Listener)));
    return wrapper;
  };
  // Replaced where workerd defines them, on a prototype of the global scope, which a script may
  // reach (Object.getPrototypeOf(self).addEventListener.call(self, ...)). EventTarget.prototype's and
  // WorkerGlobalScope.prototype's addEventListener refuse the global scope (workerd's "Illegal
  // invocation"), so these are the only ways to add a listener workerd calls. Only the global
  // scope's listeners are wrapped: any other object sharing the prototype keeps its own. Called bare
  // (addEventListener(...)), a strict function has no this: the global scope is meant.
  for (const name of ["addEventListener", "removeEventListener"]) {
    replaceInChain(target, name, (original) => ({
      [name](this: unknown, type: unknown, listener: unknown, options: unknown) {
        const scope = this ?? target;
        return apply(original, scope, [type, scope === target ? wrapperOf(type, listener) : listener, options]);
      },
    })[name]!);
  }
}

const what: Record<ListenerType, (event: unknown) => string> = {
  fetch: (event) => {
    try {
      const request = (event as FetchEvent).request;
      return `"fetch" listener for ${request.method} ${new URL(request.url).pathname}`;
    } catch {
      return '"fetch" listener';
    }
  },
  queue: (event) => `"queue" listener for "${event && (event as { queue?: unknown }).queue}"`,
  scheduled: (event) => `"scheduled" listener${cronOf(event)}`,
};

/**
 * A module Worker's settle point (module-shim.worker.ts) for listeners: a listener returns at once
 * and goes on in the promises it gives event.respondWith() and event.waitUntil(), so its run ends
 * once it has returned and those have settled. A promise reported as unhandled while a run is on
 * may still be caught by it (a fetch() started, then awaited in a try after other work): workerd
 * then fires "rejectionhandled". So while a run is on a rejection is held, and printed when a run
 * ends only if nothing caught it; with none on, nothing can catch it any more: printed at once.
 */
class HeldRejections {
  private readonly held = new Map<Promise<unknown>, unknown>();
  private running = 0;

  constructor(private readonly print: (reason: unknown) => void) {}

  unhandled(promise: Promise<unknown>, reason: unknown): void {
    if (this.running === 0) this.print(reason);
    else this.held.set(promise, reason);
  }

  handled(promise: Promise<unknown>): void {
    this.held.delete(promise);
  }

  /** One listener's run: it ends once the listener has returned and every promise it gave has settled. */
  start(): ListenerRun {
    this.running++;
    let pending = 0;
    let returned = false;
    let ended = false;
    const endIfDone = (): void => {
      if (ended || !returned || pending > 0) return;
      ended = true;
      this.running--;
      for (const [promise, reason] of this.held) {
        this.held.delete(promise);
        this.print(reason);
      }
    };
    return {
      gave: (promise) => {
        if (ended) return;
        pending++;
        const done = (): void => {
          pending--;
          endIfDone();
        };
        promise.then(done, done);
      },
      returned: () => {
        returned = true;
        endIfDone();
      },
    };
  }
}

interface ListenerRun {
  /** A promise the listener gave workerd: the run goes on until it settles. */
  gave(promise: Promise<unknown>): void;
  returned(): void;
}

/**
 * The promise is watched and handed to workerd as it was. (Reflect.set: an event that refused the
 * property would leave the listener unwatched, not failing.)
 */
function watch(
  event: unknown,
  method: "waitUntil" | "respondWith",
  apply: typeof Reflect.apply,
  run: ListenerRun,
  rejected: (error: unknown) => void,
): void {
  if (event === null || typeof event !== "object" || typeof (event as Record<string, unknown>)[method] !== "function") return;
  const original = (event as Record<string, AnyFunction>)[method]!;
  Reflect.set(event, method, function (this: unknown, promise: unknown) {
    const given = Promise.resolve(promise);
    given.catch(rejected);
    run.gave(given);
    // eslint-disable-next-line prefer-rest-params -- workerd's own arguments, as they came
    return apply(original, this, arguments as unknown as unknown[]);
  });
}
