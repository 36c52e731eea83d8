import type { DeadLetterPolicy } from "./cell-config.ts";
import type { Clock } from "./clock.ts";
import { isCellError } from "./errors.ts";
import { MessageState, type CellStore, type MessageHead, type StoredMessage } from "./store.ts";
import type { WriteLoop } from "./write-loop.ts";

const msPerSecond = 1000;
const moveSliceRows = 100;
/**
 * A failed dead-letter move is tried again after this long, doubling while it keeps failing (a
 * full disk fails every attempt until space is freed), and from the shortest again after a move
 * that worked. A target that closed under a move is no failure: the shortest wait.
 */
const moveRetryMsMin = 1000;
const moveRetryMsMax = 30_000;

/** The cell a dead-letter policy names, as the mover reaches it. */
export interface DeadLetterTarget {
  receiveDeadLetters(messages: readonly StoredMessage[]): Promise<number>;
}

/** What the mover needs of the cell whose dead letters it moves. */
export interface MovingCell {
  readonly name: string;
  readonly store: CellStore;
  readonly loop: WriteLoop;
  /** The clock's own time: a move waiting to be tried again waits on it. */
  readonly clock: Clock;
  /** The policy now (a configure may change it between moves). */
  policy(): DeadLetterPolicy;
  /** Finds the target queue's cell; undefined when there is none (see QueueCellOptions.resolveCell). */
  readonly resolveCell: ((queue: string) => Promise<DeadLetterTarget | undefined>) | undefined;
  isClosed(): boolean;
  onWarning(message: string): void;
  /** Background work that failed and will be retried (see QueueCell's backgroundFailed). */
  backgroundFailed(work: string, retry: string, error: unknown): void;
}

/**
 * Moves a cell's `moving` rows into the queue its dead-letter policy names, in slices, one move at
 * a time, trying a failed move again later. Target first, then source: a crash between the two
 * leaves a row that is moved again, once, and the target skips the id it already took
 * (CellStore.insert's skipKnownIds). Rows whose target does not exist stay in the cell's own set.
 */
export class DeadLetterMover {
  private running: Promise<void> | undefined;
  /** How long the next failed move waits before it is tried again. */
  private retryMs = moveRetryMsMin;
  /** Cancels the timer of a move waiting to be tried again; new dead letters wait for it too. */
  private cancelRetry: (() => void) | undefined;

  constructor(private readonly cell: MovingCell) {}

  /** A move is running (the cell is not idle). */
  get busy(): boolean {
    return this.running !== undefined;
  }

  /** Starts a move unless one runs or waits to be tried again. */
  start(): void {
    if (this.running !== undefined || this.cancelRetry !== undefined) return;
    this.running = this.moveAll()
      .catch((error: unknown) => this.moveFailed(error))
      .finally(() => {
        this.running = undefined;
      });
  }

  /** At the cell's close: no retry is started, and the move running, if any, has ended. */
  async stop(): Promise<void> {
    this.cancelRetry?.();
    this.cancelRetry = undefined;
    await this.running?.catch(() => undefined);
  }

  private moveFailed(error: unknown): void {
    // A target closed under the move (idle, or the host stopping) is no failure: the rows
    // stay moving, and the move is taken up again below, or at the next open.
    const targetClosed = isCellError(error, "ERR_CELL_CLOSED");
    const wait = targetClosed ? moveRetryMsMin : this.retryMs;
    if (!targetClosed) {
      this.retryMs = Math.min(2 * this.retryMs, moveRetryMsMax);
      const policy = this.cell.policy();
      const work = policy.kind === "queue" ? `moving dead letters to "${policy.queue}"` : "keeping dead letters in its own set";
      this.cell.backgroundFailed(work, `tried again in ${wait / msPerSecond} s`, error);
    }
    if (this.cell.isClosed()) return;
    const clock = this.cell.clock;
    this.cancelRetry = clock.schedule(clock.now() + wait, () => {
      this.cancelRetry = undefined;
      if (!this.cell.isClosed()) this.start();
    });
  }

  private async moveAll(): Promise<void> {
    const { store, loop } = this.cell;
    const policy = this.cell.policy();
    while (!this.cell.isClosed()) {
      const rows = store.listByState(MessageState.moving, 0, moveSliceRows);
      if (rows.length === 0) return;
      // The policy changed since these were dead-lettered, or its queue does not exist (deleted, or
      // never created): keep them in this queue's own set, where they can be listed and replayed.
      // Waiting for the queue instead would retry for ever, and hand a queue created later under
      // that name messages older than itself.
      const target = policy.kind === "queue" ? await this.cell.resolveCell?.(policy.queue) : undefined;
      if (target === undefined) {
        const kept = await loop.submit((nowMs) => {
          let n = 0;
          this.forEachStillMoving(rows, (head) => {
            store.setState(head, MessageState.dead, nowMs);
            n += 1;
          });
          return n;
        });
        if (policy.kind === "queue" && kept > 0) {
          this.cell.onWarning(
            `queue "${this.cell.name}": its dead-letter queue "${policy.queue}" does not exist; ` +
              `${kept} dead-lettered message(s) kept in this queue's own dead-letter set instead`,
          );
        }
        continue;
      }
      await target.receiveDeadLetters(rows);
      await loop.submit(() => this.forEachStillMoving(rows, (head) => store.remove(head)));
      this.retryMs = moveRetryMsMin;
    }
  }

  /** Inside a group: `act` on each of `rows` that is still moving (a purge may have taken it since). */
  private forEachStillMoving(rows: readonly StoredMessage[], act: (head: MessageHead) => void): void {
    for (const row of rows) {
      const head = this.cell.store.head(row.id);
      if (head?.state === MessageState.moving) act(head);
    }
  }
}
