import type { LeasedMessage, LeaseOptions, Cell } from "@celld/queue-cell";

/**
 * Leases for an HTTP client that may vanish while it waits. The wait ends when the client goes
 * away (or the server stops, or the queue is deleted); messages leased for a client that is gone
 * by the time the lease returns are handed back at once instead of staying hidden until their
 * visibility timeout runs out.
 */
export async function leaseForClient(
  cell: Cell,
  options: Omit<LeaseOptions, "signal">,
  clientGone: AbortSignal,
  otherStops: readonly AbortSignal[] = [],
): Promise<LeasedMessage[]> {
  const stops = anyOf([clientGone, ...otherStops]);
  let messages: LeasedMessage[];
  try {
    messages = await cell.lease({ ...options, signal: stops.signal });
  } finally {
    stops.detach();
  }
  if (messages.length > 0 && clientGone.aborted) {
    await releaseUndelivered(cell, messages);
    return [];
  }
  return messages;
}

/**
 * Hands back leased messages nobody received: ready at once, and the delivery not counted, so a
 * client that vanished mid-poll costs a message neither time nor one of its max_deliveries.
 */
export async function releaseUndelivered(cell: Cell, messages: readonly LeasedMessage[]): Promise<void> {
  if (messages.length === 0 || cell.isClosed) return;
  await cell.release(messages.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
}

/**
 * A signal aborted when any of `signals` is, until detach(). Not AbortSignal.any: on Node 20 each
 * call leaves an entry in every source's set of dependants that garbage collection never removes,
 * and the server's stop signal lives as long as the server (160,000 calls left 160,000 entries and
 * about 25 MB, measured here), so every lease for weeks would have stayed in memory.
 */
function anyOf(signals: readonly AbortSignal[]): { signal: AbortSignal; detach: () => void } {
  const controller = new AbortController();
  const abort = (): void => controller.abort();
  if (signals.some((s) => s.aborted)) {
    controller.abort();
    return { signal: controller.signal, detach: () => {} };
  }
  for (const s of signals) s.addEventListener("abort", abort, { once: true });
  return { signal: controller.signal, detach: () => signals.forEach((s) => s.removeEventListener("abort", abort)) };
}
