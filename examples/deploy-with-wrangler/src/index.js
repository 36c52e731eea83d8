// POST /greet?name=Ada queues a greeting; the queue() handler records each name in KV;
// GET /greeted lists them; GET / shows the version's message and whether the secret is set.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === "/greet") {
      await env.GREETINGS.send({ name: url.searchParams.get("name") ?? "world" });
      return new Response("queued\n", { status: 202 });
    }
    if (url.pathname === "/greeted") {
      const { keys } = await env.SEEN.list();
      return Response.json(keys.map((key) => key.name));
    }
    return new Response(`${env.MESSAGE} (API_KEY set: ${env.API_KEY !== undefined})\n`);
  },

  async queue(batch, env) {
    for (const message of batch.messages) {
      await env.SEEN.put(message.body.name, new Date().toISOString());
      message.ack();
    }
  },
};
