import type { Server, Socket } from "node:net";
import { systemClock, type Clock } from "@celld/queue-cell";

/**
 * Counters of one port's connections since it started, for the log and for /metrics. Read them
 * from `ConnectionGuard.stats`; they only grow (except `open`).
 */
export interface ConnectionStats {
  /** Client connections open now. */
  open: number;
  accepted: number;
  /** Closed at once on arrival: the port was at its maximum and none could make room. */
  refused: number;
  /** Closed to make room for a newer one: open, at the maximum, and silent (no byte sent) the longest. */
  evicted: number;
  /** Closed for sending no byte within the idle timeout. */
  idleClosed: number;
}

export interface ConnectionGuardOptions {
  /** The port's name in log lines (`--port`, `--api-port`). */
  name: string;
  /** Client connections open at once, at most. */
  max: number;
  /** A connection that has sent no byte this long after it opened is closed. */
  idleMs: number;
  clock?: Clock;
  /**
   * Told at most once a `reportWindowMs` (a minute) of what was closed since the last line, so a
   * flood costs a line a minute, not a line a connection.
   */
  report?: (line: string) => void;
  reportWindowMs?: number;
}

/**
 * Holds a listening server's client connections to a maximum and closes those that never speak.
 * At the maximum, a new connection first takes the place of the open one that has been silent
 * longest (never sent a byte: an idle flood, a browser's spare preconnection); only when every
 * open one has spoken is the newcomer refused. So a flood of idle connections can neither exhaust
 * the descriptors behind the port nor keep a real client out. Works on any net.Server, an HTTP
 * one included: "spoke" is read from the socket's byte count, which Node keeps even when its HTTP
 * parser reads the socket natively (no 'data' events), and no HTTP listener is added that would
 * change how Node answers (an `Expect: 100-continue`, an upgrade).
 */
export class ConnectionGuard {
  readonly #options: Required<Omit<ConnectionGuardOptions, "report" | "clock">> & { report?: (line: string) => void };
  readonly #clock: Clock;
  /** Connections that had sent nothing when last looked at, oldest first (Map keeps insertion order). */
  readonly #silent = new Map<Socket, number>();
  readonly #stats: ConnectionStats = { open: 0, accepted: 0, refused: 0, evicted: 0, idleClosed: 0 };
  readonly #evicted = new WeakSet<Socket>();
  readonly #unreported = { refused: 0, evicted: 0, idleClosed: 0 };
  #lastReportMs = -Infinity;
  #cancelReport: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(server: Server, options: ConnectionGuardOptions) {
    if (!Number.isInteger(options.max) || options.max < 1) throw new Error(`${options.name}: the connection maximum must be a whole number from 1, got ${options.max}`);
    this.#options = { reportWindowMs: 60_000, ...options };
    this.#clock = options.clock ?? systemClock;
    server.on("connection", (socket: Socket) => this.admit(socket));
    server.once("close", () => this.stop());
  }

  get stats(): Readonly<ConnectionStats> {
    return this.#stats;
  }

  get max(): number {
    return this.#options.max;
  }

  /** Sweeps on a timer (a quarter of the idle timeout, at most a second); tests call sweep() instead. */
  startSweeping(): this {
    const every = Math.max(10, Math.min(1_000, Math.floor(this.#options.idleMs / 4)));
    this.#timer = setInterval(() => this.sweep(), every).unref();
    return this;
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#cancelReport?.();
    this.#cancelReport = undefined;
    this.#flushReport();
  }

  /** Takes a connection the server has just accepted (its 'connection' listener). */
  admit(socket: Socket): void {
    this.#stats.accepted++;
    if (this.#stats.open >= this.#options.max && !this.#evictSilent()) {
      this.#stats.refused++;
      this.#note("refused");
      socket.destroy();
      return;
    }
    this.#stats.open++;
    this.#silent.set(socket, this.#clock.now());
    socket.once("close", () => {
      // An evicted one was counted out when it was closed, to make room at once.
      if (!this.#evicted.delete(socket)) this.#stats.open--;
      this.#silent.delete(socket);
    });
  }

  /** Closes the connections that have sent nothing for idleMs; returns how many. */
  sweep(): number {
    const cutoff = this.#clock.now() - this.#options.idleMs;
    let closed = 0;
    for (const [socket, openedAt] of this.#silent) {
      if (socket.bytesRead > 0) {
        this.#silent.delete(socket);
        continue;
      }
      // Oldest first: the first one young enough ends the sweep.
      if (openedAt > cutoff) break;
      this.#silent.delete(socket);
      socket.destroy();
      this.#stats.idleClosed++;
      closed++;
    }
    if (closed > 0) this.#note("idleClosed", closed);
    return closed;
  }

  /** Closes the oldest connection that has sent nothing; false when every open one has spoken. */
  #evictSilent(): boolean {
    for (const [socket] of this.#silent) {
      this.#silent.delete(socket);
      if (socket.bytesRead > 0) continue;
      socket.destroy();
      // Its 'close' comes later; the newcomer takes its place now.
      this.#stats.open--;
      this.#evicted.add(socket);
      this.#stats.evicted++;
      this.#note("evicted");
      return true;
    }
    return false;
  }

  #note(kind: "refused" | "evicted" | "idleClosed", count = 1): void {
    this.#unreported[kind] += count;
    if (this.#options.report === undefined || this.#cancelReport !== undefined) return;
    const due = this.#lastReportMs + this.#options.reportWindowMs;
    if (this.#clock.now() >= due) this.#flushReport();
    else this.#cancelReport = this.#clock.schedule(due, () => {
      this.#cancelReport = undefined;
      this.#flushReport();
    });
  }

  #flushReport(): void {
    const { refused, evicted, idleClosed } = this.#unreported;
    if (refused + evicted + idleClosed === 0 || this.#options.report === undefined) return;
    this.#lastReportMs = this.#clock.now();
    this.#unreported.refused = this.#unreported.evicted = this.#unreported.idleClosed = 0;
    this.#options.report(guardReportLine(this.#options.name, this.#options.max, this.#options.idleMs, { refused, evicted, idleClosed }));
  }
}

/** The rate-limited line: what was closed, the maximum, and where to raise it. */
export function guardReportLine(
  name: string,
  max: number,
  idleMs: number,
  counts: { refused: number; evicted: number; idleClosed: number },
): string {
  const parts: string[] = [];
  if (counts.refused > 0) parts.push(`refused ${counts.refused} new connection(s) at its maximum of ${max} open`);
  if (counts.evicted > 0) parts.push(`closed ${counts.evicted} silent connection(s) to make room for new ones (maximum ${max} open)`);
  if (counts.idleClosed > 0) parts.push(`closed ${counts.idleClosed} connection(s) that sent nothing for ${idleMs / 1000} s`);
  return `${name}: ${parts.join("; ")} (a flood, or a limit too low: see docs/limits.md#connections)`;
}
