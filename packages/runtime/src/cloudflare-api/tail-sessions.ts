import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { tailEventPasses, type TailFilter } from "./tail-filter.ts";
import { acceptTailSocket, type TailSocket } from "./tail-socket.ts";

/** The path of a tail's WebSocket on the API port; its id is the secret that opens it. */
const tailPath = /^\/client\/v4\/tail\/([0-9a-f]{32})$/;
/** As Cloudflare's: a tail lasts at most this long, then its socket is closed. */
const tailLifetimeMs = 6 * 60 * 60 * 1000;
/** Tails open at once on a host; wrangler opens one per `wrangler tail`. */
const tailsMax = 100;

interface Session {
  script: string;
  filter: TailFilter;
  expiresAt: number;
  sockets: Set<TailSocket>;
  timer: NodeJS.Timeout;
}

/**
 * `wrangler tail` sessions on `celld serve`: `POST .../tails` makes one for a Worker and answers the
 * URL of its WebSocket (on the API port, an unguessable id in the path), the socket gets each trace
 * event of that Worker that passes the session's filters (cloudflare-api/tail-filter.ts) as one
 * JSON text message, `DELETE .../tails/:id` ends it.
 */
export class TailSessions {
  private readonly sessions = new Map<string, Session>();

  /** `log`: told when a tail's socket opens and ends, for the operator. */
  constructor(private readonly log: (line: string) => void = () => undefined) {}

  create(script: string, apiBase: string, filter: TailFilter = {}): { id: string; url: string; expires_at: string } {
    if (this.sessions.size >= tailsMax) throw new Error(`${tailsMax} tails are open on this celld, the most it keeps at once; end one first`);
    const id = randomBytes(16).toString("hex");
    const expiresAt = Date.now() + tailLifetimeMs;
    const timer = setTimeout(() => this.remove(id), tailLifetimeMs).unref();
    this.sessions.set(id, { script, filter, expiresAt, sockets: new Set(), timer });
    return { id, url: `${apiBase.replace(/^http/, "ws")}/client/v4/tail/${id}`, expires_at: new Date(expiresAt).toISOString() };
  }

  /** Whether `id` is a tail of `script`, for its DELETE. */
  has(script: string, id: string): boolean {
    return this.sessions.get(id)?.script === script;
  }

  remove(id: string): void {
    const session = this.sessions.get(id);
    if (session === undefined) return;
    this.sessions.delete(id);
    clearTimeout(session.timer);
    for (const socket of session.sockets) socket.close();
  }

  /** The API server's upgrade requests: true when it was a tail's (answered), false to let others answer. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const match = tailPath.exec(req.url ?? "");
    if (match === null) return false;
    const session = this.sessions.get(match[1]!);
    if (session === undefined) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return true;
    }
    const tail = acceptTailSocket(req, socket, head);
    if (tail === undefined) return true;
    session.sockets.add(tail);
    this.log(`wrangler tail of Worker "${session.script}" connected`);
    void tail.closed.then(() => {
      session.sockets.delete(tail);
      this.log(`wrangler tail of Worker "${session.script}" disconnected`);
    });
    return true;
  }

  /** Each event to the tails of its Worker (`scriptName`) whose filters it passes. */
  publish(events: readonly unknown[]): void {
    if (this.sessions.size === 0) return;
    for (const event of events) {
      const script = (event as { scriptName?: unknown } | null)?.scriptName;
      if (typeof script !== "string") continue;
      let text: string | undefined;
      for (const session of this.sessions.values()) {
        if (session.script !== script || session.sockets.size === 0) continue;
        if (!tailEventPasses(session.filter, event)) continue;
        text ??= JSON.stringify(event);
        for (const socket of session.sockets) socket.sendText(text);
      }
    }
  }

  closeAll(): void {
    for (const id of [...this.sessions.keys()]) this.remove(id);
  }
}
