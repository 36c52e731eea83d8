import { Agent, request as httpRequest, type ClientRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";

/**
 * Forwarding one request from the front to the socket where workerd serves a Worker: headers as
 * the client sent them (case, order and repeats kept, the Host above all, which workerd makes the
 * Worker's request.url from), minus the hop-by-hop ones that describe the client's connection
 * rather than the request; bodies streamed both ways, never buffered.
 */

const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"]);

/** rawHeaders without the hop-by-hop ones (and those the Connection header names). */
export function endToEndHeaders(raw: readonly string[], keepUpgrade = false): string[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") for (const token of raw[i + 1]!.split(",")) named.add(token.trim().toLowerCase());
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const upgradeHeader = keepUpgrade && (name === "upgrade" || name === "connection");
    if (!upgradeHeader && (hopByHop.has(name) || named.has(name))) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/**
 * The client's address as `CF-Connecting-IP`, which Workers read for the caller's IP, unless the
 * request already has one: the rule of Miniflare's own entry (wrangler dev), so that a proxy in
 * front of celld can pass on the address it saw. workerd's direct sockets, which the front uses,
 * do not set it.
 */
export function withClientAddress(headers: string[], address: string | undefined): string[] {
  if (address === undefined) return headers;
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === "cf-connecting-ip") return headers;
  headers.push("CF-Connecting-IP", address.startsWith("::ffff:") ? address.slice("::ffff:".length) : address);
  return headers;
}

export interface Upstream {
  host: string;
  port: number;
}

/** Why a request could not reach its Worker, for the answer's body. */
export type ForwardFailure = (error: NodeJS.ErrnoException) => void;

/** Codes of a pooled connection workerd closed or reset just as it was reused. */
const staleSocketCodes = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);

/** Whether the request carries a body (which, streamed, could not be sent a second time). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/**
 * Sends `req` to `upstream` and its answer back on `res`. `failed` is told when workerd could not
 * be reached or broke off before answering (the caller answers 502); after the answer has begun,
 * a failure can only cut the response short, which destroying `res` tells the client. A request
 * with no body is sent once more on a fresh connection when the pooled one it went out on turns
 * out to have been closed or reset by workerd (seen under load in `npm run bench host`): the
 * client never sees that race, as it would not talking to workerd directly on a connection of
 * its own. A request with a body has been streamed and cannot be; it gets the 502.
 */
export function forwardRequest(req: IncomingMessage, res: ServerResponse, upstream: Upstream, agent: Agent, failed: ForwardFailure): void {
  const bodiless = !hasBody(req);
  const headers = withClientAddress(endToEndHeaders(req.rawHeaders), req.socket.remoteAddress);
  let current: ClientRequest | undefined;
  // A client gone before its answer ends frees workerd's socket (and the Worker sees the abort).
  res.on("close", () => {
    if (!res.writableFinished) current?.destroy();
  });
  const send = (mayRetry: boolean): void => {
    const outgoing = httpRequest({ host: upstream.host, port: upstream.port, method: req.method, path: req.url, headers, setHost: false, agent });
    current = outgoing;
    outgoing.on("response", (answer) => {
      const answerHeaders = endToEndHeaders(answer.rawHeaders);
      // workerd's Date stands; Node's own would make two.
      if (answerHeaders.some((value, i) => i % 2 === 0 && value.toLowerCase() === "date")) res.sendDate = false;
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, answerHeaders);
      relay(answer, res);
    });
    outgoing.on("error", (error: NodeJS.ErrnoException) => {
      if (res.headersSent) return res.destroy();
      if (mayRetry && outgoing.reusedSocket && staleSocketCodes.has(error.code ?? "") && !res.destroyed) return send(false);
      failed(error);
    });
    if (bodiless) {
      outgoing.end();
      req.resume();
    } else {
      relay(req, outgoing);
    }
  };
  send(bodiless);
}

/**
 * Streams `from` into `to`, and cuts `to` short if `from` breaks off (workerd resetting a response
 * midway, a client dropping an upload): what stream.pipeline did here, without its cost. pipeline
 * makes an AbortController for every call and aborts it when the streams finish, which builds a
 * DOMException with a stack trace each time: about half the front's CPU per request inside
 * celld's process (docs/performance.md#the-front-door).
 */
function relay(from: IncomingMessage, to: ServerResponse | ClientRequest): void {
  from.pipe(to);
  from.on("error", () => to.destroy());
  from.on("close", () => {
    if (!from.complete) to.destroy();
  });
}

/**
 * An `Upgrade` request (a WebSocket): forwarded on a connection of its own, and once workerd
 * answers 101, the two sockets are joined byte for byte until either closes. Any other answer is
 * written back as it is and the client's connection closed.
 */
export function forwardUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, upstream: Upstream, failed: ForwardFailure): void {
  const outgoing = httpRequest({
    host: upstream.host,
    port: upstream.port,
    method: req.method,
    path: req.url,
    headers: withClientAddress(endToEndHeaders(req.rawHeaders, true), req.socket.remoteAddress),
    setHost: false,
    agent: false,
  });
  outgoing.on("upgrade", (answer, inner, innerHead) => {
    socket.write(statusBlock(answer, true));
    if (innerHead.length > 0) socket.write(innerHead);
    if (head.length > 0) inner.write(head);
    inner.pipe(socket).pipe(inner);
    const end = (): void => {
      inner.destroy();
      socket.destroy();
    };
    inner.on("error", end).on("close", end);
    socket.on("error", end).on("close", end);
  });
  outgoing.on("response", (answer) => {
    socket.write(statusBlock(answer, false));
    answer.pipe(socket);
  });
  outgoing.on("error", (error: NodeJS.ErrnoException) => failed(error));
  socket.on("error", () => outgoing.destroy());
  outgoing.end();
}

/** The status line and headers of an answer, as bytes for a raw socket. */
function statusBlock(answer: IncomingMessage, upgraded: boolean): string {
  const headers = upgraded ? endToEndHeaders(answer.rawHeaders, true) : [...endToEndHeaders(answer.rawHeaders), "Connection", "close"];
  let text = `HTTP/1.1 ${answer.statusCode} ${answer.statusMessage}\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return `${text}\r\n`;
}
