import { createServer } from "node:net";

/** The Worker's port cannot be listened on: taken by another process, or not allowed. */
export class PortUnavailableError extends Error {
  readonly code = "ERR_ADDRESS_IN_USE" as const;
  constructor(host: string, port: number, reason: string) {
    super(`cannot listen on ${host}:${port}: ${reason}; stop what holds it, or pass another --port`);
    this.name = "PortUnavailableError [ERR_ADDRESS_IN_USE]";
  }
}

/**
 * Fails with a PortUnavailableError when `host:port` cannot be listened on, by listening and
 * closing at once. Checked before workerd starts: on a taken port workerd dies with a native
 * "Fatal uncaught kj::Exception" line, and Miniflare, which reads workerd's output in chunks,
 * does not always recognise it and then reports only that the runtime failed to start. Port 0
 * (any free port) needs no check. Another process can still take the port in between; workerd's
 * own error then says so.
 */
export async function checkPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      const reason =
        error.code === "EADDRINUSE"
          ? "the address is already in use (is celld, or another server, already running on it?)"
          : error.code === "EACCES"
            ? "permission denied (ports below 1024 need privileges)"
            : error.message;
      reject(new PortUnavailableError(host, port, reason));
    });
    // exclusive: a cluster primary's handle must not make a taken port look free.
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()));
  });
}
