import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError, tooLarge } from "../wire/api-error.ts";

export { tooLarge };
import {
  cloudEventMediaType,
  cloudEventsBatchMediaType,
  isJsonMediaType,
  isProtobufMediaType,
  jsonMediaType,
  mediaEssence,
  protobufMediaType,
} from "../wire/media-types.ts";

export type WireFormat = "json" | "protobuf";
/** A request body's format: the API's own, or one of the CloudEvents HTTP binding's modes (cloudevents-http.ts). */
export type RequestFormat = WireFormat | "cloudevents-structured" | "cloudevents-batch" | "cloudevents-binary";

/** A declared length over the cap, refused before a byte of the body is read. */
export function checkDeclaredLength(req: IncomingMessage, capBytes: number): void {
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > capBytes) throw tooLarge(capBytes);
}

/**
 * Whether the client waits for `100 Continue` before sending its body. Node hands such a request
 * to the server's "checkContinue" listener, and sends nothing until told to.
 */
export function expectsContinue(req: IncomingMessage): boolean {
  return req.headers.expect?.toLowerCase() === "100-continue";
}

/**
 * Reads a request body of at most `capBytes`. A declared length over the cap is refused before a
 * byte is read; a chunked body is refused as soon as it passes the cap, and the rest is read
 * only to be dropped (writeErrorAndClose).
 */
export function readBody(req: IncomingMessage, capBytes: number): Promise<Buffer> {
  try {
    checkDeclaredLength(req, capBytes);
  } catch (error) {
    return Promise.reject(error);
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const cleanup = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("aborted", onAborted);
    };
    const onData = (chunk: Buffer): void => {
      total += chunk.byteLength;
      if (total > capBytes) {
        cleanup();
        req.pause();
        reject(tooLarge(capBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const onAborted = (): void => {
      cleanup();
      reject(new ApiError("malformed_body", "the client closed the connection before the body was complete"));
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("aborted", onAborted);
  });
}

/**
 * Bodies are read as sent. A coded one (gzip, br) would otherwise be stored as its compressed
 * bytes: a binary-mode event's data silently not what was meant. RFC 7694: refuse it with 415.
 */
export function checkContentEncoding(req: IncomingMessage): void {
  const coding = req.headers["content-encoding"];
  if (coding === undefined || coding.trim() === "" || coding.trim().toLowerCase() === "identity") return;
  throw new ApiError("unsupported_media_type", `the request body has Content-Encoding ${coding}; send it without a content coding (identity)`, {
    field: "Content-Encoding",
    bound: "identity",
  });
}

/**
 * Any one of them, not ce-specversion alone: an event that lost ce-specversion on its way is still
 * binary mode, refused for the header it lacks rather than read as the API's envelope. (The
 * JavaScript SDK tells binary mode by ce-id.)
 */
const binaryModeHeaders = ["ce-specversion", "ce-id", "ce-source", "ce-type"] as const;

/**
 * The body's format, from Content-Type. No Content-Type reads as JSON. On a route that takes
 * CloudEvents, the binding's rule comes first: a cloudevents type is structured or batched mode,
 * and otherwise a header of a required attribute makes the request a binary-mode event.
 */
export function requestFormat(req: IncomingMessage, speaksProtobuf: boolean, takesCloudEvents: boolean): RequestFormat {
  const type = req.headers["content-type"];
  const essence = type === undefined ? "" : mediaEssence(type);
  if (essence.startsWith("application/cloudevents")) {
    if (takesCloudEvents && essence === cloudEventMediaType) return "cloudevents-structured";
    if (takesCloudEvents && essence === cloudEventsBatchMediaType) return "cloudevents-batch";
    // Another event format (+avro, +protobuf), or a CloudEvent where no route takes one.
    throw unsupported(type!, speaksProtobuf, takesCloudEvents);
  }
  if (takesCloudEvents && binaryModeHeaders.some((name) => req.headers[name] !== undefined)) return "cloudevents-binary";
  if (type === undefined || type === "" || isJsonMediaType(type)) return "json";
  if (speaksProtobuf && isProtobufMediaType(type)) return "protobuf";
  throw unsupported(type, speaksProtobuf, takesCloudEvents);
}

function unsupported(type: string, speaksProtobuf: boolean, takesCloudEvents: boolean): ApiError {
  const types = [jsonMediaType];
  if (speaksProtobuf) types.push(protobufMediaType);
  if (takesCloudEvents) types.push(cloudEventMediaType, cloudEventsBatchMediaType);
  let accepted = types.length === 1 ? jsonMediaType : `${types.slice(0, -1).join(", ")} or ${types[types.length - 1]}`;
  if (takesCloudEvents) accepted += ", or a binary-mode CloudEvent (ce-specversion and the other attributes as ce- headers)";
  return new ApiError("unsupported_media_type", `this route takes ${accepted}, not ${type}`, {
    field: "Content-Type",
    bound: accepted,
  });
}

/** The answer's format: the first type of Accept this route can produce, else the request's. */
export function responseFormat(req: IncomingMessage, speaksProtobuf: boolean, requestFormat: RequestFormat): WireFormat {
  // The binding's modes are answered in the API's JSON.
  const fallback: WireFormat = requestFormat === "protobuf" ? "protobuf" : "json";
  const accept = req.headers["accept"];
  if (accept === undefined || accept.trim() === "") return fallback;
  for (const range of accept.split(",")) {
    const type = range.split(";")[0]!.trim().toLowerCase();
    if (type === "*/*" || type === "application/*") return fallback;
    if (isJsonMediaType(type)) return "json";
    if (speaksProtobuf && isProtobufMediaType(type)) return "protobuf";
  }
  const offered = speaksProtobuf ? `${jsonMediaType} or ${protobufMediaType}` : jsonMediaType;
  throw new ApiError("not_acceptable", `this route answers with ${offered}; Accept allows neither`, {
    field: "Accept",
    bound: offered,
  });
}

/** An answer's bytes and type, built before it is written: its size decides whether it may be. */
export interface Answer {
  type: string;
  body: Uint8Array;
}

export function jsonAnswer(text: string): Answer {
  return { type: `${jsonMediaType}; charset=utf-8`, body: Buffer.from(text) };
}

export function protobufAnswer(bytes: Uint8Array): Answer {
  return { type: protobufMediaType, body: bytes };
}

export function writeAnswer(res: ServerResponse, status: number, answer: Answer, headers: Record<string, string> = {}): void {
  write(res, status, answer.type, answer.body, headers);
}

export function writeJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  writeAnswer(res, status, jsonAnswer(JSON.stringify(value)), headers);
}

export function writeError(res: ServerResponse, error: ApiError, headers: Record<string, string> = {}): void {
  writeJson(res, error.status, error.toJSON(), headers);
}

/**
 * Answers a request whose body is unread (refused before or while reading it), then closes the
 * connection. Closing at once leaves the unread bytes in the socket, and the kernel answers them
 * with a reset: a client that writes its whole body before reading (Python's urllib, curl
 * without Expect) sees a broken pipe instead of the answer. So the answer is sent at once, for
 * clients that read as they write, and the rest of the body is read and dropped before the
 * close, up to `drain.bytesMax` and `drain.ms`. A body declared longer than that, or one that
 * outruns either bound, is closed on unread as before.
 */
export function writeErrorAndClose(
  req: IncomingMessage,
  res: ServerResponse,
  /** An ApiError, or the Cloudflare adapter's error, which answers in Cloudflare's envelope. */
  error: { status: number; toJSON(): unknown },
  headers: Record<string, string>,
  drain: { bytesMax: number; ms: number },
): void {
  const body = Buffer.from(JSON.stringify(error.toJSON()));
  writeHead(res, error.status, `${jsonMediaType}; charset=utf-8`, body, { ...headers, connection: "close" });
  if (Number(req.headers["content-length"] ?? 0) > drain.bytesMax) {
    res.end(body);
    return;
  }
  res.write(body);
  let drained = 0;
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    req.off("data", onData);
    req.off("end", finish);
    req.off("error", finish);
    res.off("close", finish);
    if (!res.destroyed) res.end();
  };
  const onData = (chunk: Buffer): void => {
    drained += chunk.byteLength;
    if (drained > drain.bytesMax) finish();
  };
  const timer = setTimeout(finish, drain.ms);
  req.on("data", onData);
  req.on("end", finish);
  req.on("error", finish);
  res.on("close", finish);
  req.resume();
}

function write(res: ServerResponse, status: number, type: string, body: Uint8Array, headers: Record<string, string>): void {
  writeHead(res, status, type, body, headers);
  res.end(body);
}

function writeHead(res: ServerResponse, status: number, type: string, body: Uint8Array, headers: Record<string, string>): void {
  res.writeHead(status, {
    "content-type": type,
    "content-length": String(body.byteLength),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    ...headers,
  });
}

/** Resolves true once the answer has been handed to the connection, false if it closed first. */
export function delivered(res: ServerResponse): Promise<boolean> {
  if (res.writableFinished) return Promise.resolve(true);
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onFinish = (): void => {
      res.off("close", onClose);
      resolve(true);
    };
    const onClose = (): void => {
      res.off("finish", onFinish);
      resolve(res.writableFinished);
    };
    res.once("finish", onFinish);
    res.once("close", onClose);
  });
}
