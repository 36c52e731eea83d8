/**
 * One queue's load for `npm run bench threads`: a producer awaiting each sendBatch of
 * `batchMessages` messages of `bodyBytes` before the next, and a consumer leasing up to
 * `batchMessages` with a short wait and acking what it got, both until stopped. They run on the
 * calling (main) thread, as a host's HTTP layer does, whichever thread the cell runs on.
 */
import type { LeaseOptions, LeaseRef, OutgoingMessage } from "../packages/queue-cell/src/index.ts";

export const batchMessages = 100;
export const bodyBytes = 200;
/**
 * The consumer's wait when nothing is ready: short, so that a consumer that has caught up with its
 * producer is back as soon as the next batch commits, and stops promptly at the end.
 */
const leaseWaitSeconds = 0.05;

/** The calls of a cell the loops make: CellRegistry's QueueCell and the threaded registry's cell both have them. */
export interface LoadedCell {
  send(messages: readonly OutgoingMessage[]): Promise<unknown>;
  lease(options: LeaseOptions): Promise<ReadonlyArray<LeaseRef>>;
  ack(refs: readonly LeaseRef[]): Promise<unknown>;
}

/** Messages whose send was answered, and messages acked, so far. */
export interface QueueTally {
  sent: number;
  acked: number;
}

/**
 * Starts `inFlight` producer loops and as many consumer loops on `cell` (1: one call of each
 * in flight at a time, a sequential producer; more: as many requests at once as a busy host
 * serves); `done` settles once all have stopped after `stop` aborts (a waiting lease ends early
 * then), and rejects with the first call that failed.
 */
export function loadQueue(cell: LoadedCell, stop: AbortSignal, inFlight = 1): { tally: QueueTally; done: Promise<void> } {
  const tally: QueueTally = { sent: 0, acked: 0 };
  const produce = async (): Promise<void> => {
    while (!stop.aborted) {
      await cell.send(newBatch());
      tally.sent += batchMessages;
    }
  };
  const consume = async (): Promise<void> => {
    while (!stop.aborted) {
      const leased = await cell.lease({ max: batchMessages, waitSeconds: leaseWaitSeconds, signal: stop });
      if (leased.length === 0) continue;
      await cell.ack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
      tally.acked += leased.length;
    }
  };
  const loops = Array.from({ length: inFlight }, () => [produce(), consume()]).flat();
  return { tally, done: Promise.all(loops).then(() => undefined) };
}

/**
 * A new batch each call, as a host decodes each request's bodies afresh: a threaded cell may take
 * over (transfer) the bodies it is given, so one batch is not sent twice.
 */
function newBatch(): OutgoingMessage[] {
  const batch: OutgoingMessage[] = new Array(batchMessages);
  for (let i = 0; i < batchMessages; i++) batch[i] = { body: new Uint8Array(bodyBytes).fill(120), contentType: "bytes" };
  return batch;
}
