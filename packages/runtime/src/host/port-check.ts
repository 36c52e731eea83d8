import { createServer } from "node:net";

/** An address celld must listen on (the Workers' or the API's): the port is taken or not allowed, or the host is wrong. */
export class PortUnavailableError extends Error {
  readonly code = "ERR_ADDRESS_IN_USE" as const;
  constructor(host: string, port: number, reason: string) {
    super(`cannot listen on ${host}:${port}: ${reason}`);
    this.name = "PortUnavailableError [ERR_ADDRESS_IN_USE]";
  }
}

function reasonFor(host: string, error: NodeJS.ErrnoException, portFlag: string): string {
  const pickAnotherPort = `stop what holds it, or pass another ${portFlag}`;
  switch (error.code) {
    case "EADDRINUSE":
      return `the address is already in use (is celld, or another server, already running on it?); ${pickAnotherPort}`;
    case "EACCES":
      return `permission denied (ports below 1024 need privileges); ${pickAnotherPort}`;
    case "EADDRNOTAVAIL":
      return `no network interface of this machine has the address ${host} (EADDRNOTAVAIL); pass another --host, such as 127.0.0.1 or 0.0.0.0`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `the host name "${host}" does not resolve (${error.code}); pass another --host`;
    default:
      return `${error.message}; pass another --host or ${portFlag}`;
  }
}

/**
 * Fails with a PortUnavailableError when `host:port` cannot be listened on, by listening and
 * closing at once. Checked before workerd starts: on a taken port or a host it cannot listen on,
 * workerd dies with a native "Fatal uncaught kj::Exception" line, and Miniflare, which reads
 * workerd's output in chunks, does not always recognise it and then reports only that the runtime
 * failed to start. Port 0 (any free port) is checked too, for the host's sake. Another process
 * can still take the port in between; workerd's own error then says so.
 */
export async function checkPortFree(host: string, port: number, portFlag = "--port"): Promise<void> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => reject(new PortUnavailableError(host, port, reasonFor(host, error, portFlag))));
    // exclusive: a cluster primary's handle must not make a taken port look free.
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()));
  });
}
