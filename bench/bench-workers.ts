/**
 * The one Worker script both hosts run in the host bench, and the consumer settings both are
 * given, so celld and Miniflare's in-memory queues see exactly the same code and configuration.
 * Imports nothing: the Miniflare baseline child loads this file and must never load celld.
 */

export const benchQueue = "jobs";
export const benchWorkerName = "bench";
// Any date from 2024-03-18 on makes `json` the default content type, as on Cloudflare today.
export const benchCompatibilityDate = "2025-09-01";
/** Both hosts: batches of up to 100, flushed 1 s after the first message at the latest. */
export const benchConsumer = { maxBatchSize: 100, maxBatchTimeoutSeconds: 1, maxRetries: 3 } as const;

/**
 * Routes (all POST except /noop, which answers any method):
 *   /noop               answers at once: the HTTP round trip a send is compared with;
 *   /send               one env.JOBS.send(); the reply is the time the Worker saw around the
 *                       await, in ms (coarse: workerd moves its clock only on I/O);
 *   /send-batch?n=100   one env.JOBS.sendBatch() of n messages.
 * The consumer acks every batch explicitly.
 */
export const benchWorkerScript = `
const pad = "x".repeat(64);
const body = (n) => ({ n, pad });

export default {
  async fetch(request, env) {
    const { pathname, searchParams } = new URL(request.url);
    if (pathname === "/noop") return new Response("");
    if (pathname === "/send") {
      const start = performance.now();
      await env.JOBS.send(body(0));
      return new Response(String(performance.now() - start));
    }
    if (pathname === "/send-batch") {
      const n = Number(searchParams.get("n") ?? 100);
      await env.JOBS.sendBatch(Array.from({ length: n }, (_, i) => ({ body: body(i) })));
      return new Response("");
    }
    return new Response("no such route", { status: 404 });
  },
  async queue(batch) {
    batch.ackAll();
  },
};
`;

/** The same Worker as celld's users write it: wrangler.toml beside worker.js. */
export function benchWranglerToml(): string {
  return `name = "${benchWorkerName}"
main = "worker.js"
compatibility_date = "${benchCompatibilityDate}"

[[queues.producers]]
binding = "JOBS"
queue = "${benchQueue}"

[[queues.consumers]]
queue = "${benchQueue}"
max_batch_size = ${benchConsumer.maxBatchSize}
max_batch_timeout = ${benchConsumer.maxBatchTimeoutSeconds}
max_retries = ${benchConsumer.maxRetries}
`;
}
