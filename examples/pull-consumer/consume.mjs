// An HTTP pull consumer of the "orders" queue, written against Cloudflare's own SDK: the same code
// consumes from Cloudflare when baseURL is left out. Run it while `celld dev --api-port` runs:
//   CELLD_API=http://127.0.0.1:8788 CELLD_KEY=ck_... node examples/pull-consumer/consume.mjs
import Cloudflare from "cloudflare";

const api = process.env.CELLD_API ?? "http://127.0.0.1:8788";
const account_id = process.env.CELLD_ACCOUNT ?? "local";
const cf = new Cloudflare({ apiToken: process.env.CELLD_KEY, baseURL: `${api}/client/v4` });

const queues = await cf.queues.list({ account_id });
const queue = queues.result.find((q) => q.queue_name === "orders");
if (queue === undefined) throw new Error(`no queue "orders" in account ${account_id}: is celld dev running with this example?`);

let idle = 0;
while (idle < 3) {
  const { messages = [] } = await cf.queues.messages.pull(queue.queue_id, { account_id, batch_size: 10, visibility_timeout_ms: 30_000 });
  if (messages.length === 0) {
    idle += 1;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    continue;
  }
  idle = 0;
  // A JSON body comes base64-encoded to a pull consumer, as from Cloudflare.
  for (const m of messages) console.log(`order ${m.id} (attempt ${m.attempts}):`, JSON.parse(Buffer.from(m.body, "base64").toString()));
  const acked = await cf.queues.messages.ack(queue.queue_id, { account_id, acks: messages.map((m) => ({ lease_id: m.lease_id })) });
  console.log(`acked ${acked.ackCount}`);
}
console.log("no more orders for 3 s; done");
