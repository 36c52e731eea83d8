/**
 * The project `npm run bench threads-host` runs in celld: one Worker producing to and consuming
 * from `queues` queues. A request sends to one queue, awaiting each sendBatch before the next (the
 * producer Workers code usually is, issue 34); each queue's consumer acks every batch.
 */

export const hostBatchMessages = 100;

/** Queue i is bound as `Q{i}` and named `threads-{i}`. */
export function threadsWranglerToml(queues: number): string {
  const lines = [`name = "threads-bench"`, `main = "worker.js"`, `compatibility_date = "2025-09-01"`, ""];
  for (let i = 0; i < queues; i++) lines.push("[[queues.producers]]", `binding = "Q${i}"`, `queue = "threads-${i}"`, "");
  for (let i = 0; i < queues; i++) {
    lines.push("[[queues.consumers]]", `queue = "threads-${i}"`, `max_batch_size = ${hostBatchMessages}`, "max_batch_timeout = 1", "");
  }
  return lines.join("\n");
}

/**
 * POST /send-batches?q=0&calls=100&n=100: `calls` sendBatch calls of `n` messages to queue `q`,
 * one after another. A body is about 200 B as JSON.
 */
export const threadsWorkerScript = `
const pad = "x".repeat(180);

export default {
  async fetch(request, env) {
    const { searchParams } = new URL(request.url);
    const queue = env["Q" + searchParams.get("q")];
    if (queue === undefined) return new Response("no such queue", { status: 404 });
    const calls = Number(searchParams.get("calls") ?? 100);
    const n = Number(searchParams.get("n") ?? ${hostBatchMessages});
    for (let c = 0; c < calls; c++) {
      await queue.sendBatch(Array.from({ length: n }, (_, i) => ({ body: { n: c * n + i, pad } })));
    }
    return new Response("");
  },
  async queue(batch) {
    batch.ackAll();
  },
};
`;
