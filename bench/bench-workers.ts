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
 *   /send-batch?n=100   one env.JOBS.sendBatch() of n messages;
 *   /send-batches?calls=100&n=100
 *                       calls sendBatch() calls of n messages one after another, each awaited
 *                       before the next: the producer Workers code usually is (issue 34);
 *   /send-waves?waves=200&per=50
 *                       waves of per send() calls at once, each wave awaited before the next.
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
    if (pathname === "/send-batches") {
      const calls = Number(searchParams.get("calls") ?? 100);
      const n = Number(searchParams.get("n") ?? 100);
      for (let c = 0; c < calls; c++) {
        await env.JOBS.sendBatch(Array.from({ length: n }, (_, i) => ({ body: body(c * n + i) })));
      }
      return new Response("");
    }
    if (pathname === "/send-waves") {
      const waves = Number(searchParams.get("waves") ?? 200);
      const per = Number(searchParams.get("per") ?? 50);
      for (let w = 0; w < waves; w++) {
        await Promise.all(Array.from({ length: per }, (_, i) => env.JOBS.send(body(w * per + i))));
      }
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
