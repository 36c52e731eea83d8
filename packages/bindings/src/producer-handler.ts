import type { IncomingMessage, ServerResponse } from "node:http";
import { isCellError, limits, type BacklogMetrics, type CellError, type Cell, type SendOptions, type SendTrace } from "@celld/queue-cell";
import { exactBytes, parseBatchRequest } from "./batch-request.ts";
import {
  ProtocolError,
  describeCellError,
  errorReply,
  type ProducerCall,
  type ProducerReply,
} from "./cloudflare-errors.ts";
import { checkJsonBody, parseMessageFormat } from "./message-format.ts";
import { SendStageTimer, type SendStages } from "./send-stages.ts";

const utf8 = new TextDecoder();

export interface ProducerBinding {
  /** The queue the binding sends to; the cell `getCell` returns must be this queue's. */
  queue: string;
  /** The producer's `delivery_delay`: the delay of a send that names none. */
  deliveryDelaySeconds?: number;
  /** The queue's cell, open. Called per request, so a cell closed while idle is opened again. */
  getCell: () => Promise<Cell>;
  /**
   * Told of each call the cell refused because its storage failed (a full disk, a failed flush).
   * The Worker gets the error too, but a full disk is the operator's to fix, and a Worker may not
   * log what its `send()` threw.
   */
  onStorageFailure?: (error: CellError) => void;
  /** Told where each committed send's time went (`npm run bench host`); unset, nothing is timed. */
  onSendStages?: (stages: SendStages) => void;
}

/** One request from workerd's queue binding, read whole. Header names are lower case. */
export interface ProducerRequest {
  method: string;
  /** The request target; only the path is read (`/message`, `/batch`, `/metrics`). */
  url: string;
  headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  body: Uint8Array;
}

export type { ProducerReply } from "./cloudflare-errors.ts";

/**
 * Answers workerd's queue binding for one producer binding, so `env.JOBS.send()`, `sendBatch()`
 * and `metrics()` in a Worker reach the queue's cell. workerd checks no limit; the cell checks
 * every one, and each refusal goes back with Cloudflare's code and words (cloudflare-errors.ts).
 * Bodies are stored exactly as workerd encoded them, with their format as the content type.
 */
export class ProducerHandler {
  private readonly binding: ProducerBinding;

  constructor(binding: ProducerBinding) {
    const delay = binding.deliveryDelaySeconds;
    // Config validation owns this bound; reaching here with a bad value is a host bug.
    if (delay !== undefined && !(Number.isInteger(delay) && delay >= 0 && delay <= limits.delaySecondsMax)) {
      throw new RangeError(
        `producer of queue "${binding.queue}": deliveryDelaySeconds must be a whole number from 0 to ${limits.delaySecondsMax}, got ${delay}`,
      );
    }
    this.binding = binding;
  }

  /** Operating errors become Cloudflare error replies; anything else is a bug and is thrown. */
  async handle(request: ProducerRequest, timer?: SendStageTimer): Promise<ProducerReply> {
    const path = pathOf(request.url);
    const route = `${request.method.toUpperCase()} ${path}`;
    const call: ProducerCall = route === "POST /batch" ? "sendBatch" : "send";
    try {
      switch (route) {
        case "POST /message":
          return sentReply(await this.sendMessage(request, timer));
        case "POST /batch":
          return sentReply(await this.sendBatch(request, timer));
        case "GET /metrics":
          // metrics() reads the bare object; send() and sendBatch() read it under metadata.
          return jsonReply(await this.withCell((cell) => cell.backlogMetrics()));
        default:
          throw new ProtocolError(
            "ERR_NO_ROUTE",
            `no route for ${route}; the queue binding uses POST /message, POST /batch and GET /metrics`,
          );
      }
    } catch (error) {
      if (error instanceof ProtocolError) return errorReply(error.code, error.message);
      if (!isCellError(error)) throw error;
      if (error.code === "ERR_STORAGE") this.binding.onStorageFailure?.(error);
      return errorReply(error.code, describeCellError(error, call));
    }
  }

  /** The handler as a Miniflare Node service binding (`serviceBindings: { X: { node } }`). */
  readonly node = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const timer = this.binding.onSendStages === undefined ? undefined : new SendStageTimer();
    const body = await readBody(req);
    timer?.bodyRead();
    const request = { method: req.method ?? "GET", url: req.url ?? "/", headers: req.headers, body };
    const reply = await this.handle(request, timer);
    timer?.durable();
    res.writeHead(reply.status, reply.statusText, reply.headers);
    res.end(reply.body);
    if (timer !== undefined) this.tellStages(timer, request);
  };

  private tellStages(timer: SendStageTimer, request: ProducerRequest): void {
    const batch = pathOf(request.url) === "/batch";
    const count = batch ? Number(header(request, "cf-queue-batch-count") ?? Number.NaN) : 1;
    const stages = timer.answered(batch ? "sendBatch" : "send", count);
    if (stages !== undefined) this.binding.onSendStages!(stages);
  }

  private async sendMessage(request: ProducerRequest, timer: SendStageTimer | undefined): Promise<BacklogMetrics> {
    const contentType = parseMessageFormat(header(request, "x-msg-fmt"), "contentType");
    checkJsonBody(contentType, request.body, "message");
    timer?.decoded();
    const options = this.sendOptions(request, timer);
    const result = await this.withCell((cell) => cell.send([{ body: request.body, contentType }], options));
    return result.metrics;
  }

  private async sendBatch(request: ProducerRequest, timer: SendStageTimer | undefined): Promise<BacklogMetrics> {
    const messages = parseBatchRequest(utf8.decode(request.body));
    timer?.decoded();
    const options = this.sendOptions(request, timer);
    const result = await this.withCell((cell) => cell.send(messages, options));
    return result.metrics;
  }

  /** The call's delay: X-Msg-Delay-Secs, else the producer's delivery_delay, else the queue's. */
  private sendOptions(request: ProducerRequest, trace: SendTrace | undefined): SendOptions {
    const options = this.delayOption(request);
    if (trace !== undefined) options.trace = trace;
    return options;
  }

  private delayOption(request: ProducerRequest): SendOptions {
    const raw = header(request, "x-msg-delay-secs");
    if (raw !== undefined) {
      const seconds = Number(raw);
      // A header that is not a number goes to the cell as the text it was, so its refusal quotes it.
      return { delaySeconds: raw.trim() !== "" && Number.isFinite(seconds) ? seconds : (raw as unknown as number) };
    }
    const fallback = this.binding.deliveryDelaySeconds;
    return fallback === undefined ? {} : { delaySeconds: fallback };
  }

  /**
   * Runs `use` on the queue's cell. A cell that closed between lookup and use (an idle close)
   * wrote nothing, so the call is tried once more on the cell opened in its place. `use` must
   * reach the cell without awaiting first: the cell counts a producer call in flight from that
   * moment.
   */
  private async withCell<T>(use: (cell: Cell) => Promise<T>): Promise<T> {
    try {
      return await use(await this.cell());
    } catch (error) {
      if (!isCellError(error, "ERR_CELL_CLOSED")) throw error;
      return use(await this.cell());
    }
  }

  private async cell(): Promise<Cell> {
    const cell = await this.binding.getCell();
    if (cell.name !== this.binding.queue) {
      throw new Error(`producer of queue "${this.binding.queue}" was given the cell of queue "${cell.name}"`);
    }
    return cell;
  }
}

/** The Node service handler for one producer binding. */
export function nodeProducerHandler(binding: ProducerBinding): ProducerHandler["node"] {
  return new ProducerHandler(binding).node;
}

function sentReply(metrics: BacklogMetrics): ProducerReply {
  return jsonReply({ metadata: { metrics } });
}

function jsonReply(value: unknown): ProducerReply {
  return { status: 200, statusText: "OK", headers: { "content-type": "application/json" }, body: JSON.stringify(value) };
}

/** The path of a request target; the common origin-form without building a URL. */
function pathOf(target: string): string {
  if (!target.startsWith("/")) return new URL(target, "http://queue.invalid").pathname;
  const query = target.indexOf("?");
  return query === -1 ? target : target.slice(0, query);
}

function header(request: ProducerRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === "string" ? value : value?.join(", ");
}

// Events rather than `for await`: the async iterator costs a promise per chunk on every send.
function readBody(req: IncomingMessage): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.once("error", reject);
    req.once("end", () => resolve(exactBytes(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))));
  });
}
