export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (request.method !== "POST" || !url.pathname.startsWith("/orders/")) {
      return new Response("POST /orders/<item> to queue an order\n", { status: 404 });
    }
    const order = { item: url.pathname.slice("/orders/".length), at: new Date().toISOString() };
    await env.ORDERS.send(order);
    return Response.json({ queued: order }, { status: 202 });
  },
};
