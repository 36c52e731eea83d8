/**
 * What both handler shims (module-shim.worker.ts for a module Worker, service-worker-shim.worker.ts
 * for a service-worker script) run inside workerd to report an error: the thrown value as the author
 * would want to read it, each error once where it surfaces several ways, a queue error as the record
 * the host reads, and the reporting of what a timer's or a microtask's callback throws.
 *
 * Worker-side code: it imports nothing from Node and typechecks against @cloudflare/workers-types
 * (packages/runtime/tsconfig.worker.json); worker-code-bundles.ts bundles it into each shim.
 */

/**
 * A thrown value as the author would want to read it: an error's stack, then its causes (an error
 * rethrown with { cause } names what went wrong first), each once; a plain object as JSON, where
 * String() would say only "[object Object]".
 */
export function describe(error: unknown): string {
  let text = describeOne(error);
  const seen = new Set<unknown>([error]);
  for (let cause = causeOf(error); cause !== undefined && !seen.has(cause); cause = causeOf(cause)) {
    seen.add(cause);
    text += `\nCaused by: ${describeOne(cause)}`;
  }
  return text;
}

const causeOf = (value: unknown): unknown => (value instanceof Error ? value.cause : undefined);

function describeOne(value: unknown): string {
  if (value && typeof (value as { stack?: unknown }).stack === "string") return (value as { stack: string }).stack;
  if (value !== null && typeof value === "object" && !(value instanceof Error)) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined && json !== "{}") return json;
    } catch {
      // A cycle or a BigInt: String() below still names it.
    }
  }
  return String(value);
}

/** A queue error as the host reads it (QueueErrorMarks in queue-error-record.ts). */
export interface QueueRecord {
  queue: string;
  tag: string;
  text: string;
}

export interface Reports {
  /** Prints `[celld] lead: <the error described>`. */
  report(lead: string, error: unknown): void;
  /** report(), unless the error was printed before. */
  reportOnce(lead: string, error: unknown): void;
  /** The record of a queue error; the error counts as printed. */
  queueRecord(batch: unknown, lead: string, error: unknown): QueueRecord;
  /** Whether an error was printed (or recorded) before. */
  printed(error: unknown): boolean;
}

/**
 * Reports printed through `say`. One error can surface several ways (a promise handed to
 * waitUntil() may also be what the handler throws, or have a then() nobody catches): a handler's
 * throw is printed for every invocation it fails (an error kept from an earlier one fails each
 * anew), the other ways (reportOnce) only an error not printed before. The batch's first message id
 * in a queue record lets the host pair the error with the batch's fate.
 */
export function createReports(say: (text: string) => void): Reports {
  const printed = new WeakSet<object>();
  const mark = (error: unknown): void => {
    if (error !== null && (typeof error === "object" || typeof error === "function")) printed.add(error);
  };
  const report = (lead: string, error: unknown): void => {
    mark(error);
    say(`[celld] ${lead}: ${describe(error)}`);
  };
  return {
    report,
    reportOnce: (lead, error) => {
      if (!printed.has(error as object)) report(lead, error);
    },
    queueRecord: (batch, lead, error) => {
      mark(error);
      let tag = "";
      try {
        tag = String((batch as { messages: Array<{ id: unknown }> }).messages[0]!.id);
      } catch {
        // No messages to name: the host prints the error unpaired.
      }
      const queue = String(batch && (batch as { queue?: unknown }).queue);
      return { queue, tag, text: `[celld] ${lead}: ${describe(error)}` };
    },
    printed: (error) => printed.has(error as object),
  };
}

/**
 * The cron a scheduled event names, as a report's ` for "<cron>"`, or nothing for an event fired
 * with no cron (Fetcher.scheduled() without one).
 */
export function cronOf(event: unknown): string {
  const cron = event && (event as { cron?: unknown }).cron;
  return typeof cron === "string" && cron !== "" ? ` for "${cron}"` : "";
}

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * Replaces the function `name` wherever `target`'s prototype chain defines it (in workerd, on a
 * prototype, not the global scope itself), so that one reached through a prototype
 * (Object.getPrototypeOf(self).setTimeout) is the replacement too.
 */
export function replaceInChain(target: object, name: string, make: (original: AnyFunction) => AnyFunction): void {
  for (let owner: object | null = target; owner !== null; owner = Object.getPrototypeOf(owner)) {
    const own = Object.getOwnPropertyDescriptor(owner, name);
    if (own === undefined || typeof own.value !== "function") continue;
    // With the original's length (workerd's are 0), so that what a Worker reads of it is workerd's.
    const replacement = make(own.value as AnyFunction);
    Object.defineProperty(replacement, "length", { value: (own.value as AnyFunction).length });
    Object.defineProperty(owner, name, { ...own, value: replacement });
  }
}

/**
 * What a callback the runtime runs later, outside any handler or listener (a timer's, a
 * microtask's), throws: no handler's report sees it, and workerd says it only among the
 * informational lines the host drops, or for a module Worker in a deployment without a
 * service-worker script not at all. The global functions that take such a callback are replaced
 * with ones that hand the runtime a reporting one; the error is rethrown, so workerd does with it
 * what it did. `apply` is Reflect.apply as it was when the shim loaded.
 */
export function reportCallbackErrors(target: object, apply: typeof Reflect.apply, reportOnce: Reports["reportOnce"]): void {
  const reportingCallback = (name: string, callback: unknown): unknown =>
    typeof callback !== "function"
      ? callback
      : function (this: unknown, ...args: unknown[]) {
          try {
            return apply(callback as AnyFunction, this, args);
          } catch (error) {
            reportOnce(`a ${name}() callback threw`, error);
            throw error;
          }
        };
  for (const name of ["setTimeout", "setInterval", "queueMicrotask"]) {
    replaceInChain(target, name, (original) => ({
      [name](this: unknown, callback: unknown, ...rest: unknown[]) {
        return apply(original, this ?? target, [reportingCallback(name, callback), ...rest]);
      },
    })[name]!);
  }
}
