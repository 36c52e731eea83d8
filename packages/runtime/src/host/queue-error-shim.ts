/**
 * workerd reports nothing when a queue() handler run through Fetcher.queue throws: the host only
 * learns the outcome "exception". So that a Worker author sees the error and its stack in the
 * host's log, the Worker's entry is wrapped: its module is re-exported unchanged, and the default
 * export's queue handler prints a thrown error (console.error, which workerd passes to the host's
 * stderr) and rethrows it, so the outcome, and the retries, are what they would have been.
 */
export function queueErrorShim(mainPath: string): string {
  const main = JSON.stringify(mainPath);
  return `import * as user from ${main};
export * from ${main};
const original = user.default;
const report = (queue, error) =>
  console.error(\`[celld] queue() handler for "\${queue}" threw: \${error && error.stack ? error.stack : String(error)}\`);
let wrapped = original;
if (typeof original === "function" && original.prototype && typeof original.prototype.queue === "function") {
  // A class default export (WorkerEntrypoint): a subclass with the same name.
  wrapped = class extends original {
    async queue(batch) {
      try {
        return await super.queue(batch);
      } catch (error) {
        report(batch.queue, error);
        throw error;
      }
    }
  };
  Object.defineProperty(wrapped, "name", { value: original.name });
} else if (original !== null && typeof original === "object" && typeof original.queue === "function") {
  wrapped = Object.assign(Object.create(Object.getPrototypeOf(original)), original, {
    async queue(batch, env, ctx) {
      try {
        return await original.queue.call(this, batch, env, ctx);
      } catch (error) {
        report(batch.queue, error);
        throw error;
      }
    },
  });
}
export default wrapped;
`;
}
