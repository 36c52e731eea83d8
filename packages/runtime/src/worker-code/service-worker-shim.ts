import type { WorkerBundle } from "../bundle/bundle.ts";
import { callbackReportingSource, cronOfSource, errorReportingSource } from "./error-description-source.ts";
import { queueErrorMarker } from "./queue-error-record.ts";

/**
 * A service-worker script (no exports; addEventListener) gets what a module Worker's shim gives
 * (handler-error-shim.ts): what its "fetch", "queue" and "scheduled" listeners throw, a rejected
 * event.respondWith() or event.waitUntil() promise, a rejection nobody handled and what a timer's
 * or a microtask's callback throws (callbackReportingSource) are printed with the script's own
 * stack. workerd reports them only among its informational lines, which the host drops
 * (service-worker-console.ts): they name no Worker and no batch, and with a module Worker in the
 * same deployment they also repeat what its shim printed.
 *
 * Such a script is one plain script, with no imports, so the shim is code put before the bundle's
 * first line: it runs first, wraps the global addEventListener, and prints through console.error,
 * which reaches the host as the script's console output (ServiceWorkerConsole). A "queue"
 * listener's error goes to the host as a record under the Worker's token (queue-error-record.ts),
 * as a module's queue() handler's does. The shim's code is one arrow function called at once in
 * strict mode: it leaves no binding in the script's global scope, and the token is an argument of
 * that call, in no function the script can reach and read with toString() (strict functions are not
 * handed out by a stack's call sites either).
 *
 * In a service-worker script a rejected event.waitUntil() promise fails the batch (workerd waits
 * for it to give the outcome), so for a "queue" listener it is the batch's error, a record.
 */
export function serviceWorkerShim(consumerToken: string | undefined): string {
  const marker = consumerToken === undefined ? "undefined" : JSON.stringify(queueErrorMarker(consumerToken));
  return `((marker, write, apply, stringify, output, target, add) => {
"use strict";
const say = (text) => void apply(write, output, [text]);
${errorReportingSource}
${cronOfSource}
${callbackReportingSource}
// Written as one line the host reads under the Worker's token.
const reportQueueError = (event, lead, error) => {
  if (marker === undefined) return report(lead, error);
  say(marker + stringify(queueRecord(event, lead, error)));
};
apply(add, target, ["unhandledrejection", (event) => reportOnce("unhandled promise rejection", event.reason)]);
const what = {
  fetch: (event) => {
    try {
      return \`"fetch" listener for \${event.request.method} \${new URL(event.request.url).pathname}\`;
    } catch {
      return '"fetch" listener';
    }
  },
  queue: (event) => \`"queue" listener for "\${event && event.queue}"\`,
  scheduled: (event) => \`"scheduled" listener\${cronOf(event)}\`,
};
// The promise is watched and handed to workerd as it was. (Reflect.set: an event that refused the
// property would leave the listener unwatched, not failing.)
const watch = (event, method, rejected) => {
  if (event === null || typeof event !== "object" || typeof event[method] !== "function") return;
  const original = event[method];
  Reflect.set(event, method, function (promise) {
    Promise.resolve(promise).catch(rejected);
    return apply(original, this, arguments);
  });
};
const listening = (type, listener) =>
  function (event) {
    const about = () => what[type](event);
    if (type === "queue") {
      watch(event, "waitUntil", (error) => {
        if (!printed.has(error)) reportQueueError(event, \`an event.waitUntil() promise of the \${about()} rejected\`, error);
      });
    } else {
      if (type === "fetch") watch(event, "respondWith", (error) => reportOnce(\`the event.respondWith() promise of the \${about()} rejected\`, error));
      watch(event, "waitUntil", (error) => reportOnce(\`an event.waitUntil() promise of the \${about()} rejected\`, error));
    }
    try {
      return typeof listener === "function" ? apply(listener, this, [event]) : apply(listener.handleEvent, listener, [event]);
    } catch (error) {
      if (type === "queue") reportQueueError(event, \`\${about()} threw\`, error);
      else report(\`\${about()} threw\`, error);
      throw error;
    }
  };
// The same listener added twice is one listener, and removing it removes it: one wrapper for each.
const wrappers = { fetch: new WeakMap(), queue: new WeakMap(), scheduled: new WeakMap() };
const wrapperOf = (type, listener) => {
  const byListener = typeof type === "string" && Object.hasOwn(wrappers, type) ? wrappers[type] : undefined;
  if (byListener === undefined || listener === null || (typeof listener !== "function" && typeof listener !== "object")) return listener;
  let wrapper = byListener.get(listener);
  if (wrapper === undefined) byListener.set(listener, (wrapper = listening(type, listener)));
  return wrapper;
};
// Replaced where workerd defines them, on a prototype of the global scope, which a script may
// reach (Object.getPrototypeOf(self).addEventListener.call(self, ...)). EventTarget.prototype's and
// WorkerGlobalScope.prototype's addEventListener refuse the global scope (workerd's "Illegal
// invocation"), so these are the only ways to add a listener workerd calls. Only the global
// scope's listeners are wrapped: any other object sharing the prototype keeps its own. Called bare
// (addEventListener(...)), a strict function has no this: the global scope is meant.
for (const name of ["addEventListener", "removeEventListener"]) {
  replaceInChain(name, (original) => ({
    [name](type, listener, options) {
      const scope = this ?? target;
      return apply(original, scope, [type, scope === target ? wrapperOf(type, listener) : listener, options]);
    },
  })[name]);
}
})(${marker}, console.error, Reflect.apply, JSON.stringify, console, globalThis, globalThis.addEventListener);`;
}

/**
 * The script's bundle with the shim on its first lines. The map gives those lines no position,
 * and entryLines tells StackPositions to drop the shim's own frames, as it drops a module shim's.
 */
export function withServiceWorkerShim(bundle: WorkerBundle, consumerToken: string | undefined): WorkerBundle {
  const shim = serviceWorkerShim(consumerToken);
  const lines = shim.split("\n").length;
  return {
    ...bundle,
    code: `${shim}\n${bundle.code}`,
    sourceMap: { ...bundle.sourceMap, mappings: ";".repeat(lines) + bundle.sourceMap.mappings },
    entryLines: lines,
  };
}
