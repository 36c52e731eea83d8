/** Several messages posted as one (PortOutbox): the receiver handles them in order, in one callback. */
export interface MessageBatch<M> {
  kind: "batch";
  messages: M[];
}

interface Posted<M> {
  message: M;
  transfer: ArrayBuffer[];
}

/**
 * The messages one side of a cell thread's port posts during one turn of its event loop, posted
 * together once that turn's JavaScript (its promise jobs included) has run: one postMessage, one
 * wake-up of the other thread, one callback there, instead of one each.
 *
 * Why (measured, see docs/design-notes.md, threadcpu): posted one by one, a group commit's
 * answers reached the main thread as separate messages, and the calls they released (the
 * producer's next send, the consumer's next lease) came back separately too. The cell thread, idle
 * on a core of its own, woke at the first and committed it alone, so the second waited behind that
 * group's flush and made a group (and an fdatasync) of its own: twice the groups and fsyncs a
 * message of a cell on the main thread, where both calls join one group. Sent together, the calls
 * one turn makes arrive together and join one group, as they do on the main thread.
 *
 * Order is kept: a batch holds every message posted in the turn, in the order posted.
 *
 * When a batch goes is the poster's `schedule`: the main thread posts on process.nextTick (after
 * the promise jobs of the callback that posted, so the calls its continuations make go together).
 * A cell thread posts on setImmediate: a group with a producer's send answers that send first and
 * the group's other calls on setImmediate (WriteLoop, SubmitOptions.producer); posted on nextTick,
 * the send's answer went alone, the producer's next send came back alone and made a group of its
 * own. Posted after the deferred answers, they cross together and the calls they release do too.
 */
export class PortOutbox<M> {
  private posted: Array<Posted<M>> = [];
  private scheduled = false;

  constructor(
    private readonly deliver: (message: M | MessageBatch<M>, transfer: ArrayBuffer[]) => void,
    /** A message that could not be posted (a value a structured clone refuses): told with why. */
    private readonly undeliverable: (message: M, error: unknown) => void,
    /** Runs the batch's posting once the turn's work is done: process.nextTick or setImmediate. */
    private readonly schedule: (post: () => void) => void,
  ) {}

  post(message: M, transfer: ArrayBuffer[] = []): void {
    this.posted.push({ message, transfer });
    if (this.scheduled) return;
    this.scheduled = true;
    this.schedule(this.flush);
  }

  /** Drops what was posted and not yet sent (the other side has gone). */
  clear(): void {
    this.posted = [];
  }

  readonly flush = (): void => {
    this.scheduled = false;
    const posted = this.posted;
    this.posted = [];
    if (posted.length === 0) return;
    if (posted.length === 1) return this.deliverOne(posted[0]!);
    try {
      this.deliver({ kind: "batch", messages: posted.map((p) => p.message) }, posted.flatMap((p) => p.transfer));
    } catch {
      // One message that cannot be cloned fails the whole batch, before anything was sent: each
      // goes alone, so that only that one fails.
      for (const p of posted) this.deliverOne(p);
    }
  };

  private deliverOne(p: Posted<M>): void {
    try {
      this.deliver(p.message, p.transfer);
    } catch (error) {
      this.undeliverable(p.message, error);
    }
  }
}

export function isBatch<M>(message: M | MessageBatch<M>): message is MessageBatch<M> {
  return (message as { kind?: unknown }).kind === "batch";
}
