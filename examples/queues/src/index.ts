// The Queues example Worker.
//   POST /jobs/<anything>   queues one job for that path
//   GET  /status            what was processed and what was dead-lettered
// A job whose path ends in /fail is retried by the consumer (message.retry()); after two retries
// it lands in the dead-letter queue "jobs-dlq", whose consumer (this same script) records it.

interface Job {
  path: string;
  queuedAt: string;
}

interface Env {
  JOBS: Queue<Job>;
  RESULTS: KVNamespace;
}

// The few Workers types this file uses, so the example needs no type package to read.
interface Queue<Body> {
  send(body: Body, options?: { delaySeconds?: number }): Promise<unknown>;
}
interface KVNamespace {
  put(key: string, value: string): Promise<void>;
  get(key: string): Promise<string | null>;
  list(options: { prefix: string }): Promise<{ keys: Array<{ name: string }> }>;
}
interface Message<Body> {
  id: string;
  timestamp: Date;
  body: Body;
  attempts: number;
  ack(): void;
  retry(options?: { delaySeconds?: number }): void;
}
interface MessageBatch<Body> {
  queue: string;
  messages: Array<Message<Body>>;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname.startsWith("/jobs/")) {
      const job: Job = { path: url.pathname.slice("/jobs".length), queuedAt: new Date().toISOString() };
      await env.JOBS.send(job);
      return Response.json({ queued: job.path }, { status: 202 });
    }
    if (request.method === "GET" && url.pathname === "/status") {
      return Response.json({
        processed: await readAll(env.RESULTS, "processed:"),
        deadLettered: await readAll(env.RESULTS, "dead:"),
      });
    }
    return new Response("POST /jobs/<path> to queue a job; GET /status to see results\n", { status: 404 });
  },

  async queue(batch: MessageBatch<Job>, env: Env): Promise<void> {
    if (batch.queue === "jobs-dlq") {
      for (const message of batch.messages) {
        await env.RESULTS.put(
          `dead:${message.id}`,
          JSON.stringify({ path: message.body.path, id: message.id, deadLetteredAt: new Date().toISOString() }),
        );
      }
      return;
    }
    for (const message of batch.messages) {
      if (message.body.path.endsWith("/fail")) {
        console.log(`job ${message.body.path} failed (attempt ${message.attempts})`);
        message.retry();
        continue;
      }
      await env.RESULTS.put(
        `processed:${message.id}`,
        JSON.stringify({ path: message.body.path, id: message.id, attempts: message.attempts }),
      );
      message.ack();
    }
  },
};

async function readAll(kv: KVNamespace, prefix: string): Promise<unknown[]> {
  const { keys } = await kv.list({ prefix });
  const values = await Promise.all(keys.map((k) => kv.get(k.name)));
  return values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as unknown);
}
