import { BatchNotDeliveredError, dispatchKeyHeader, encodeBatch, type QueueHandlerResult, type QueueInvoker } from "@celld/bindings";
import { Pool, type Dispatcher } from "undici";
import { afterPendingSignals } from "../host/process-signals.ts";

/** Errors of a connection that was never made: the batch cannot have reached workerd. */
const notConnected = new Set(["ECONNREFUSED", "ENOENT", "UND_ERR_CONNECT_TIMEOUT"]);

/** Where the dispatch Worker listens: its Unix socket, or a loopback URL. */
export type QueueDispatchTarget = { socketPath: string } | URL;

/**
 * Node's side of the queue dispatch Worker: one batch frame (batch-wire.ts in bindings) per POST
 * to the Worker's direct socket, over kept-alive connections; one client per host.
 */
export class QueueDispatchClient {
  private readonly pool: Pool;

  /** `key`: the one the dispatch Worker was given (queueDispatchWorkerOptions); it refuses others. */
  constructor(
    target: QueueDispatchTarget,
    private readonly key: string,
  ) {
    const unix = !(target instanceof URL);
    // Over a Unix socket the origin only fills the Host header.
    this.pool = new Pool(unix ? "http://localhost" : target.origin, {
      ...(unix ? { socketPath: target.socketPath } : {}),
      // One connection per batch in flight: together at most the consumers' max_concurrency.
      connections: null,
      // A queue() handler may run for the whole wall time (15 minutes). The dispatcher's race
      // decides when it has run too long; undici's 300-second defaults must not decide first.
      headersTimeout: 0,
      bodyTimeout: 0,
      // workerd closes a connection idle for 5 s and sends no Keep-Alive hint (measured with
      // workerd 1.20260426). A POST sent as it closes would fail a batch its handler never saw,
      // so idle connections are dropped well before that.
      keepAliveTimeout: 2_000,
    });
  }

  /** Runs batches on the consumer Worker the dispatch Worker binds as `binding`. */
  invoker(binding: string): QueueInvoker {
    return async (queue, messages, metadata, signal) => {
      let response: Dispatcher.ResponseData;
      try {
        response = await this.pool.request({
          method: "POST",
          path: "/",
          headers: { "content-type": "application/octet-stream", [dispatchKeyHeader]: this.key },
          body: encodeBatch({ binding, queue, metadata, messages }),
          // With no timeouts of its own (above), only the dispatcher giving up ends a request
          // whose handler never answers, and frees its connection.
          signal: signal ?? null,
        });
      } catch (error) {
        // workerd's end may be a Ctrl-C that celld has too: the dispatcher judges the batch once
        // the stop it asks for has begun, and so hands it back uncounted rather than count it.
        await afterPendingSignals();
        if (!notConnected.has((error as { code?: unknown }).code as string)) throw error;
        throw new BatchNotDeliveredError(`the queue dispatch Worker could not be reached: ${(error as Error).message}`, {
          cause: error,
        });
      }
      const { statusCode, body } = response;
      const text = await body.text();
      // The dispatcher logs this and retries the batch as a failed delivery.
      if (statusCode !== 200) throw new Error(`the queue dispatch Worker answered ${statusCode}: ${text}`);
      return handlerResult(text);
    };
  }

  /** Drops every connection. Batches still in flight fail; a stopped dispatcher hands them back. */
  close(): Promise<void> {
    return this.pool.destroy();
  }
}

/** The Worker is ours: a reply of another shape is a bug, and is thrown as one. */
function handlerResult(text: string): QueueHandlerResult {
  const result = JSON.parse(text) as QueueHandlerResult;
  const ok =
    typeof result?.outcome === "string" &&
    typeof result.ackAll === "boolean" &&
    typeof result.retryBatch?.retry === "boolean" &&
    Array.isArray(result.explicitAcks) &&
    Array.isArray(result.retryMessages);
  if (!ok) throw new Error(`the queue dispatch Worker answered an unexpected result: ${text.slice(0, 500)}`);
  return result;
}
