/**
 * The source of `describe(error)`, which both handler shims (handler-error-shim.ts for a module
 * Worker, service-worker-shim.ts for a service-worker script) run inside workerd: a thrown value
 * as the author would want to read it. An error's stack, then its causes (an error rethrown with
 * { cause } names what went wrong first), each once; a plain object as JSON, where String() would
 * say only "[object Object]".
 */
export const describeErrorSource = `const describe = (error) => {
  let text = one(error);
  const seen = new Set([error]);
  for (let cause = causeOf(error); cause !== undefined && !seen.has(cause); cause = causeOf(cause)) {
    seen.add(cause);
    text += \`\\nCaused by: \${one(cause)}\`;
  }
  return text;
};
const causeOf = (value) => (value instanceof Error ? value.cause : undefined);
const one = (value) => {
  if (value && typeof value.stack === "string") return value.stack;
  if (value !== null && typeof value === "object" && !(value instanceof Error)) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined && json !== "{}") return json;
    } catch {
      // A cycle or a BigInt: String() below still names it.
    }
  }
  return String(value);
};`;

/**
 * What both shims build their reports from, around describe (above), given a `say(text)` in
 * scope that prints a line. One error can surface several ways (a promise handed to waitUntil()
 * may also be what the handler throws, or have a then() nobody catches): a handler's throw is
 * printed for every invocation it fails (an error kept from an earlier one fails each anew), the
 * other ways (reportOnce) only an error not printed before. queueRecord is a queue error as the
 * host reads it (QueueErrorMarks): the batch's first message id lets the host pair the error with
 * the batch's fate.
 */
export const errorReportingSource = `${describeErrorSource}
const printed = new WeakSet();
const mark = (error) => {
  if (error !== null && (typeof error === "object" || typeof error === "function")) printed.add(error);
};
const report = (lead, error) => {
  mark(error);
  say(\`[celld] \${lead}: \${describe(error)}\`);
};
const reportOnce = (lead, error) => {
  if (!printed.has(error)) report(lead, error);
};
const queueRecord = (batch, lead, error) => {
  mark(error);
  let tag = "";
  try {
    tag = String(batch.messages[0].id);
  } catch {
    // No messages to name: the host prints the error unpaired.
  }
  return { queue: String(batch && batch.queue), tag, text: \`[celld] \${lead}: \${describe(error)}\` };
};`;

/**
 * `cronOf(event)`: the cron a scheduled event names, as a report's " for "<cron>"", or nothing for
 * an event fired with no cron (Fetcher.scheduled() without one).
 */
export const cronOfSource = `const cronOf = (event) => {
  const cron = event && event.cron;
  return typeof cron === "string" && cron !== "" ? \` for "\${cron}"\` : "";
};`;

/**
 * What a callback the runtime runs later, outside any handler or listener (a timer's, a
 * microtask's), throws: no handler's report sees it, and workerd says it only among the
 * informational lines the host drops, or for a module Worker in a deployment without a
 * service-worker script not at all. Both shims replace the global functions that take such a
 * callback with ones that hand the runtime a reporting one, given `apply` (Reflect.apply), `target`
 * (the global scope) and reportOnce (errorReportingSource) in scope; the error is rethrown, so
 * workerd does with it what it did. A function is replaced wherever the global scope's prototype
 * chain defines it (in workerd, on a prototype, not the global scope itself), so that one reached
 * through a prototype (Object.getPrototypeOf(self).setTimeout) is the replacement too.
 */
export const callbackReportingSource = `const replaceInChain = (name, make) => {
  for (let owner = target; owner !== null; owner = Object.getPrototypeOf(owner)) {
    const own = Object.getOwnPropertyDescriptor(owner, name);
    if (own === undefined || typeof own.value !== "function") continue;
    // With the original's length (workerd's are 0), so that what a Worker reads of it is workerd's.
    const replacement = make(own.value);
    Object.defineProperty(replacement, "length", { value: own.value.length });
    Object.defineProperty(owner, name, { ...own, value: replacement });
  }
};
const reportingCallback = (name, callback) =>
  typeof callback !== "function"
    ? callback
    : function (...args) {
        try {
          return apply(callback, this, args);
        } catch (error) {
          reportOnce(\`a \${name}() callback threw\`, error);
          throw error;
        }
      };
for (const name of ["setTimeout", "setInterval", "queueMicrotask"]) {
  replaceInChain(name, (original) => ({
    [name](callback, ...rest) {
      return apply(original, this ?? target, [reportingCallback(name, callback), ...rest]);
    },
  })[name]);
}`;
