/**
 * The queue dispatch Worker. It runs inside the host's workerd beside the user's Workers, and the
 * host POSTs it one consumer batch per request (batch-wire.ts). It decodes the messages with
 * toConsumerMessage, runs the consumer Worker's queue() handler through its service binding
 * (Fetcher.queue, which workerd offers with the service_binding_extra_handlers flag) and answers
 * what workerd reported as JSON: the QueueHandlerResult of batch-outcome.ts.
 *
 * Why a Worker: calling Fetcher.queue from Node goes through Miniflare's "magic proxy" (devalue
 * over HTTP to a proxy Durable Object), which cost about a fifth of the host's Node CPU per
 * message. Here the bodies cross as raw bytes and workerd does the rest.
 *
 * Worker-side code: it imports nothing from Node (the host bundles it with the two files it
 * imports) and typechecks against @cloudflare/workers-types (tsconfig.worker.json).
 */
import { BatchFrameError, decodeBatch, dispatchKeyBinding, dispatchKeyHeader } from "./batch-wire.ts";
import { toConsumerMessage } from "./consumer-message.ts";

/** The host's service bindings, one per consumer Worker, and the key its requests carry. */
type Env = Record<string, Fetcher> & { [dispatchKeyBinding]: string };

const encoder = new TextEncoder();

/** Whether the request carries the host's key (batch-wire.ts says why), compared in constant time. */
function fromHost(request: Request, env: Env): boolean {
  const given = encoder.encode(request.headers.get(dispatchKeyHeader) ?? "");
  const expected = encoder.encode(env[dispatchKeyBinding]);
  return given.byteLength === expected.byteLength && crypto.subtle.timingSafeEqual(given, expected);
}

export default {
  async fetch(request, env): Promise<Response> {
    if (!fromHost(request, env)) return new Response("only the celld host may run batches here", { status: 403 });
    if (request.method !== "POST") return new Response("POST one batch frame", { status: 405 });
    let frame;
    try {
      frame = decodeBatch(new Uint8Array(await request.arrayBuffer()));
    } catch (error) {
      if (error instanceof BatchFrameError) return new Response(error.message, { status: 400 });
      throw error;
    }
    // Own properties only: a frame naming "toString" must not reach Object.prototype.
    if (!Object.hasOwn(env, frame.binding) || frame.binding === dispatchKeyBinding) {
      return new Response(`no consumer Worker is bound as "${frame.binding}"`, { status: 400 });
    }
    const consumer = env[frame.binding] as Fetcher;
    let result: FetcherQueueResult;
    try {
      result = await consumer.queue(frame.queue, frame.messages.map(toConsumerMessage), frame.metadata);
    } catch (error) {
      // workerd could not run the handler at all (a thrown handler is an outcome, not this):
      // the host turns the 500 into its "could not be run" path.
      const text = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
      return new Response(`Fetcher.queue failed: ${text}`, { status: 500 });
    }
    // Named fields, not the whole object: this is the QueueHandlerResult contract with the host.
    return Response.json({
      outcome: result.outcome,
      ackAll: result.ackAll,
      retryBatch: result.retryBatch,
      explicitAcks: result.explicitAcks,
      retryMessages: result.retryMessages,
    });
  },
} satisfies ExportedHandler<Env>;
