import type { RoutedWorker, WorkerRouter } from "./worker-router.ts";

/**
 * The start banner's lines: where each Worker of a deployment answers on `--port`. The first
 * Worker's line keeps the form scripts read (`Worker "app" listening on http://127.0.0.1:8787/`);
 * each other Worker gets `reachable at` with its own hosts, then its routes.
 */
export function workerUrlLines(router: WorkerRouter, workers: readonly RoutedWorker[], frontUrl: URL): string[] {
  const port = frontUrl.port === "" ? "" : `:${frontUrl.port}`;
  // *.localhost resolves to the loopback: shown only where the front listens on it.
  const loopback = ["127.0.0.1", "[::1]", "localhost", "0.0.0.0", "[::]"].includes(frontUrl.hostname);
  const hostUrls = (name: string): string[] =>
    router.workerHosts(name).filter((host) => loopback || !host.endsWith(".localhost")).map((host) => `http://${host}${port}/`);
  return workers.map((worker, index) => {
    const routes = worker.routes.map((r) => (r.customDomain ? `${r.pattern} (custom domain)` : r.pattern));
    const routeText = routes.length === 0 ? "" : `routes ${routes.join(", ")}`;
    if (index === 0) {
      const also = [...hostUrls(worker.name), ...(routes.length === 0 ? [] : [routeText])];
      const more = workers.length === 1 ? "" : ", and every request no other Worker's host or route claims";
      return `Worker "${worker.name}" listening on ${frontUrl.href}${also.length === 0 && more === "" ? "" : ` (also ${[...also].join("; ")}${more})`}`;
    }
    const urls = hostUrls(worker.name);
    const where = [...urls, ...(routeText === "" ? [] : [routeText])];
    if (where.length === 0) return `Worker "${worker.name}" has no host of its own (workers_dev = false) and no routes: reachable through its bindings only`;
    return `Worker "${worker.name}" reachable at ${where.join("; ")}`;
  });
}
