import { Counter, Gauge, type Registry } from "prom-client";
import type { ConnectionStats } from "../front/connection-guard.ts";

/**
 * The client connections of celld's ports (`--port`, `--api-port`), from their guards' own
 * counters, read at each scrape: open now, refused at the maximum, closed to make room or for
 * never sending a byte.
 */
export class ConnectionMetrics {
  private readonly ports = new Map<string, () => Readonly<ConnectionStats>>();

  constructor(registry: Registry) {
    const ports = this.ports;
    const registers = [registry];
    new Gauge({
      name: "celld_connections_open",
      help: "Client connections open now, by port (workers, api).",
      labelNames: ["port"],
      registers,
      collect() {
        this.reset();
        for (const [port, stats] of ports) this.set({ port }, stats().open);
      },
    });
    new Counter({
      name: "celld_connections_refused_total",
      help: "Client connections refused on arrival: the port was at its maximum and every open one had spoken.",
      labelNames: ["port"],
      registers,
      collect() {
        this.reset();
        for (const [port, stats] of ports) this.inc({ port }, stats().refused);
      },
    });
    new Counter({
      name: "celld_connections_closed_total",
      help: "Client connections celld closed: evicted (silent, to make room at the maximum) or idle (no byte within the idle timeout).",
      labelNames: ["port", "reason"],
      registers,
      collect() {
        this.reset();
        for (const [port, stats] of ports) {
          const s = stats();
          this.inc({ port, reason: "evicted" }, s.evicted);
          this.inc({ port, reason: "idle" }, s.idleClosed);
        }
      },
    });
  }

  /** Reads `stats` at each scrape as the port named `port`; a later call replaces it (a restart). */
  watch(port: string, stats: () => Readonly<ConnectionStats>): void {
    this.ports.set(port, stats);
  }
}
