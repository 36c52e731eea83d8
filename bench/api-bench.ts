/**
 * The native API's throughput over HTTP with the typed client, in JSON and in protobuf, each
 * beside the cell's own figure for the same work measured in the same run:
 *   1. send: 100-event calls from 4 concurrent callers;
 *   2. lease(100) then ack, from 4 concurrent workers, on a filled queue.
 * Durable cells (durability "full": the WAL flushed before every answer), the server and client in this one process on loopback.
 * Run: npm run bench api (or node --import tsx bench/api-bench.ts)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CellRegistry, type OutgoingMessage, type QueueCell } from "@celld/queue-cell";
import Cloudflare from "cloudflare";
import { fmt, median, perSecond } from "../packages/queue-cell/bench/bench-stats.ts";
import { eventFromJson, eventsToMessages } from "../packages/runtime/src/api/cloudevents.ts";
import { ApiKeyStore, startApiServer } from "../packages/runtime/src/api/index.ts";
import { QueuesClient, type EventInput, type WireFormat } from "../packages/runtime/src/client/index.ts";

const rounds = Number(process.env.CELLD_BENCH_ROUNDS ?? 5);
const sendMessages = Number(process.env.CELLD_BENCH_API_SEND ?? 20_000);
const leaseMessages = Number(process.env.CELLD_BENCH_API_LEASE ?? 10_000);
const callers = 4;
const batch = 100;
const env = "orgs/bench/projects/bench/envs/bench";

/** A typical small event: a few attributes and a JSON object of about 150 bytes. */
function events(n: number, offset = 0): EventInput[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `evt-${offset + i}`,
    source: "/bench/orders",
    type: "com.example.order.created",
    subject: `order-${offset + i}`,
    data: { orderId: offset + i, customer: "c-1234", total: 129.95, currency: "EUR", items: [{ sku: "A-1", qty: 2 }, { sku: "B-7", qty: 1 }] },
  }));
}

/** The same events as the API would store them, for the cell's direct figure. */
function cellMessages(n: number): OutgoingMessage[] {
  const envelopes = events(n).map((e, i) => eventFromJson({ specversion: "1.0", ...e }, `events[${i}]`));
  return eventsToMessages(envelopes, "events");
}

interface Rig {
  registry: CellRegistry;
  /** The real `cloudflare` SDK on /client/v4, with the same key (account "bench"). */
  cloudflare: Cloudflare;
  queueId: (queue: string) => Promise<string>;
  client: (format: WireFormat) => QueuesClient;
  cell: (queue: string) => Promise<QueueCell>;
  createQueue: (queue: string) => Promise<void>;
  close: () => Promise<void>;
}

async function rig(): Promise<Rig> {
  const dataDir = mkdtempSync(join(tmpdir(), "celld-api-bench-"));
  const registry = new CellRegistry({ dataDir });
  const keys = ApiKeyStore.open(dataDir);
  const server = await startApiServer({ registry, keys, dataDir, port: 0 });
  const key = keys.create({ env, scopes: ["events:publish", "events:write", "events:read"] }).key;
  const clients: QueuesClient[] = [];
  const admin = new QueuesClient({ url: server.url, apiKey: key, env, format: "json" });
  return {
    registry,
    cloudflare: new Cloudflare({ apiToken: key, baseURL: `${server.url}/client/v4`, maxRetries: 0 }),
    queueId: async (queue) => (await admin.getQueue(queue)).id,
    client(format) {
      const client = new QueuesClient({ url: server.url, apiKey: key, env, format });
      clients.push(client);
      return client;
    },
    cell: (queue) => registry.open(`${env}/queues/${queue}`),
    async createQueue(queue) {
      await admin.createQueue(queue, { visibilityTimeout: 300 });
    },
    async close() {
      for (const c of [admin, ...clients]) await c.close();
      await server.close();
      await registry.closeAll();
      keys.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Runs `work` on `callers` concurrent loops until `total` messages are done; messages per second. */
async function concurrently(total: number, work: () => Promise<number>): Promise<number> {
  let done = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (done < total) {
        const n = await work();
        if (n === 0) break;
        done += n;
      }
    }),
  );
  return perSecond(done, start);
}

async function sendRound(r: Rig, queue: string, format: WireFormat | "cell"): Promise<number> {
  await r.createQueue(queue);
  if (format === "cell") {
    const cell = await r.cell(queue);
    const messages = cellMessages(batch);
    return concurrently(sendMessages, async () => (await cell.send(messages)).ids.length);
  }
  const client = r.client(format);
  const payload = events(batch);
  return concurrently(sendMessages, async () => (await client.send(queue, payload)).messageIds.length);
}

async function leaseAckRound(r: Rig, queue: string, format: WireFormat | "cell"): Promise<number> {
  await r.createQueue(queue);
  const cell = await r.cell(queue);
  const messages = cellMessages(batch);
  for (let filled = 0; filled < leaseMessages; filled += batch) await cell.send(messages);
  if (format === "cell") {
    return concurrently(leaseMessages, async () => {
      const leased = await cell.lease({ max: batch });
      if (leased.length > 0) await cell.ack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
      return leased.length;
    });
  }
  const client = r.client(format);
  return concurrently(leaseMessages, async () => {
    const leased = await client.lease(queue, { maxMessages: batch });
    if (leased.length > 0) await client.ack(queue, leased);
    return leased.length;
  });
}

/** Pull(100) + ack through Cloudflare's REST shape and the real SDK, on a queue filled the same way. */
async function pullAckRound(r: Rig, queue: string): Promise<number> {
  await r.createQueue(queue);
  const cell = await r.cell(queue);
  const messages = cellMessages(batch);
  for (let filled = 0; filled < leaseMessages; filled += batch) await cell.send(messages);
  const queueId = await r.queueId(queue);
  const account_id = "bench";
  return concurrently(leaseMessages, async () => {
    const pulled = await r.cloudflare.queues.messages.pull(queueId, { account_id, batch_size: batch, visibility_timeout_ms: 300_000 });
    const leased = pulled.messages ?? [];
    if (leased.length > 0) await r.cloudflare.queues.messages.ack(queueId, { account_id, acks: leased.map((m) => ({ lease_id: m.lease_id! })) });
    return leased.length;
  });
}

function line(label: string, figures: Record<"cell" | "json" | "protobuf", number>): string {
  const { cell, json, protobuf } = figures;
  return (
    `${label}: cell direct ${fmt(cell)} msg/s | HTTP JSON ${fmt(json)} msg/s (ratio ${(json / cell).toFixed(2)}) | ` +
    `HTTP protobuf ${fmt(protobuf)} msg/s (ratio ${(protobuf / cell).toFixed(2)}) | protobuf/JSON ${(protobuf / json).toFixed(2)}`
  );
}

export async function runApiBench(): Promise<string[]> {
  const lines = [
    `api: ${rounds} rounds each, medians; ${callers} concurrent callers, ${batch} events per call; ` +
      `event ~${Buffer.byteLength(cellMessages(1)[0]!.attributes ?? "") + cellMessages(1)[0]!.body.byteLength} B stored; durability full (WAL flushed before answering), loopback HTTP`,
  ];
  const send = { cell: [] as number[], json: [] as number[], protobuf: [] as number[] };
  const lease = { cell: [] as number[], json: [] as number[], protobuf: [] as number[] };
  const pull: number[] = [];
  const r = await rig();
  try {
    for (let round = 0; round < rounds; round++) {
      // Interleaved, so drift of the machine during the run touches all three alike.
      for (const format of ["cell", "json", "protobuf"] as const) {
        send[format].push(await sendRound(r, `send-${format}-${round}`, format));
        lease[format].push(await leaseAckRound(r, `lease-${format}-${round}`, format));
      }
      pull.push(await pullAckRound(r, `pull-${round}`));
    }
  } finally {
    await r.close();
  }
  const medians = (f: typeof send) => ({ cell: median(f.cell), json: median(f.json), protobuf: median(f.protobuf) });
  lines.push(line("  send, 100-event calls", medians(send)));
  lines.push(line("  lease(100) + ack", medians(lease)));
  const native = median(lease.json);
  lines.push(
    `  Cloudflare shape, SDK pull(100) + ack: ${fmt(median(pull))} msg/s (ratio to native HTTP JSON lease + ack ${(median(pull) / native).toFixed(2)}; targets >= 0.7 and >= 5,000 msg/s)`,
  );
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const l of await runApiBench()) console.log(l);
}
