import type { LeasedMessage, LeaseOptions, QueueCell } from "@celld/queue-cell";

/**
 * Leases for an HTTP client that may vanish while it waits. The wait ends when the client goes
 * away (or the server stops, or the queue is deleted); messages leased for a client that is gone
 * by the time the lease returns are handed back at once instead of staying hidden until their
 * visibility timeout runs out.
 */
export async function leaseForClient(
  cell: QueueCell,
  options: Omit<LeaseOptions, "signal">,
  clientGone: AbortSignal,
  otherStops: readonly AbortSignal[] = [],
): Promise<LeasedMessage[]> {
  const signal = otherStops.length === 0 ? clientGone : AbortSignal.any([clientGone, ...otherStops]);
  const messages = await cell.lease({ ...options, signal });
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
export async function releaseUndelivered(cell: QueueCell, messages: readonly LeasedMessage[]): Promise<void> {
  if (messages.length === 0 || cell.isClosed) return;
  await cell.release(messages.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
}
