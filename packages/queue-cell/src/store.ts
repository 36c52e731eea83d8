import type { CellError } from "./errors.ts";

/**
 * The storage seam. A cell's rules (fencing, dead-lettering, retention, admission) live in the
 * cell; a store only keeps rows and answers indexed questions about them. Every mutation runs
 * inside `transaction`, which the cell's single write loop calls once per group of calls.
 *
 * SQLite is the one backend today. A networked backend (PostgreSQL holding cell state behind a
 * fenced ownership lease) implements the same operations; `test/store-conformance.ts` is the
 * suite every backend must pass.
 */

export const MessageState = {
  /** Waiting; leasable once `dueAt` (its visible time) has passed. */
  ready: 0,
  /** Held by a lease until `dueAt` (the lease's expiry). */
  leased: 1,
  /** In the queue's own dead-letter set since `dueAt`. */
  dead: 2,
  /** Dead-lettered into another queue; the row leaves once the target has committed it. */
  moving: 3,
} as const;
export type MessageState = (typeof MessageState)[keyof typeof MessageState];

export interface NewMessage {
  id: string;
  /** When the message may first be leased. */
  dueAt: number;
  /** When a producer first sent it; kept across dead-letter moves (a Worker's message.timestamp). */
  sentAt: number;
  /** When it entered this queue; retention counts from here. */
  enqueuedAt: number;
  /**
   * With a dead-letter move: when it entered the queue it is moved from. A move repeated after a
   * crash brings the same time; a message that has come round a chain of dead-letter queues again
   * brings a later one (see insert's skipKnownIds).
   */
  movedFromEnqueuedAt?: number;
  contentType: string;
  /** Opaque metadata (CloudEvent attributes as JSON), or null. */
  attributes: string | null;
  body: Uint8Array;
}

export interface StoredMessage extends NewMessage {
  seq: number;
  state: MessageState;
  deliveries: number;
  leaseGeneration: number;
  /** body bytes + attribute bytes, what limits and backlog figures count. */
  bytes: number;
}

/** A message as a lease hands it out. */
export interface LeasedMessage {
  id: string;
  leaseGeneration: number;
  /** 1 on the first delivery. */
  deliveries: number;
  sentAt: number;
  enqueuedAt: number;
  /** When the message became leasable (its send, delay end, nack delay end or lease expiry). */
  availableAt: number;
  leaseExpiresAt: number;
  contentType: string;
  attributes: string | null;
  body: Uint8Array;
}

/**
 * What a lease leaves in the store, and the message the cell hands out: one object, since a copy
 * of each for the cell's callers cost about 1 µs a message under load.
 */
export interface LeasedRow extends StoredMessage, LeasedMessage {}

/** What a fencing decision needs to know about one message. */
export interface MessageHead {
  seq: number;
  id: string;
  state: MessageState;
  dueAt: number;
  deliveries: number;
  leaseGeneration: number;
  bytes: number;
}

export interface StoreTotals {
  /** Ready rows, whether due or delayed. */
  ready: number;
  leased: number;
  dead: number;
  moving: number;
  /** Bytes of ready and leased rows: the backlog. */
  backlogBytes: number;
}

/** What the cell's lease-expiry and retention work can next fall due on. */
export interface DueTimes {
  /** Earliest lease expiry. */
  nextLeaseExpiryAt: number | null;
  /** Earliest entry time of any row, for the retention sweep. */
  oldestEnqueuedAt: number | null;
}

export interface CellStore {
  /**
   * Runs `fn` atomically. A throw writes nothing. The backend's own I/O failures come out as
   * CellError ERR_STORAGE (retryable); anything else that `fn` throws passes through unchanged.
   * Its writes are visible at once but durable only when `durable()` says so.
   */
  transaction<T>(fn: () => T): T;
  /**
   * Resolves once every transaction committed so far is on disk (rejects with ERR_STORAGE if
   * that failed). Undefined when a transaction is already as durable as it will get when it
   * returns (a backend that flushes inside commit, or durability off). Once a flush has failed,
   * the store takes no more transactions: `transaction` throws that ERR_STORAGE from then on.
   * `urgent`: a producer waits on it; a backend may start a flush of its own beside one running
   * rather than wait for it to end (WalSync.durable).
   */
  durable(urgent?: boolean): Promise<void> | undefined;
  /**
   * Why the store takes no more transactions, for good: a flush of its log or of its database
   * file failed, and only a restart (which recovers from the log on disk) may write again; or a
   * transaction found the file damaged, and more writes could overwrite what a recovery can still
   * read. Undefined while every flush has worked and no damage was found.
   */
  readonly failed: CellError | undefined;
  /**
   * Settles once a transaction may start without the event loop waiting for a lock another
   * thread holds (a quiet queue's log being truncated); undefined when one may start now.
   */
  writesHeld(): Promise<void> | undefined;

  /**
   * Inserts rows as ready. With `skipKnownIds` (a dead-letter move), a row is skipped whose id is
   * present, or was taken in before with the same movedFromEnqueuedAt, even if removed since (by a
   * receipt from before receipts kept entry times: taken in at or after this movedFromEnqueuedAt).
   */
  insert(rows: readonly NewMessage[], options?: { skipKnownIds?: boolean }): string[];
  /**
   * Leases up to `limit` due ready rows: state leased, dueAt = expiry, deliveries+1, generation+1,
   * recording `owner` (0: nobody in particular; see QueueCell.expireLeasesOf).
   */
  lease(nowMs: number, limit: number, expiresAtMs: number, owner?: number): LeasedRow[];
  /** Up to `limit` leased rows whose lease names `owner`. */
  leasedBy(owner: number, limit: number): MessageHead[];
  head(id: string): MessageHead | undefined;
  /** Moves one row to `state` with a new dueAt; `from` is its current state (for the totals). */
  setState(head: MessageHead, state: MessageState, dueAtMs: number): void;
  /** Returns a leased row to ready, takes back the delivery its lease counted, new generation. */
  unlease(head: MessageHead, dueAtMs: number): void;
  /** Moves a row to ready, resetting its delivery count, with a new generation (replay). */
  resetToReady(head: MessageHead, dueAtMs: number): void;
  remove(head: MessageHead): void;
  /**
   * Acks: deletes each named row that is ready or leased with the named generation, in one go.
   * Returns each deleted id with the generation it was held under; a ref it did not delete
   * changed nothing.
   */
  removeHeld(refs: ReadonlyArray<{ id: string; leaseGeneration: number }>): Map<string, number>;

  /** Leased rows whose lease ended at or before `nowMs`, oldest first. */
  expiredLeases(nowMs: number, limit: number): MessageHead[];
  /**
   * The first `limit` dead rows dead-lettered in [fromMs, toMs), in the order they died (ties by
   * seq). No cursor: a replay takes each slice out of the dead state before asking for the next.
   */
  deadInRange(fromMs: number, toMs: number, limit: number): MessageHead[];
  listByState(state: MessageState, afterSeq: number, limit: number): StoredMessage[];

  /**
   * Deletes every row that entered at or before `cutoffMs`, or only the oldest `maxRows` of them;
   * returns how many messages they held.
   */
  sweepEnqueuedBefore(cutoffMs: number, maxRows?: number): number;
  /**
   * Deletes rows in the given states; returns how many messages they held. With `slice`, only up
   * to `slice.rows` of them, among those whose seq is at most `slice.seqAtMost`.
   */
  purge(states: readonly MessageState[], slice?: { rows: number; seqAtMost: number }): number;
  /** The highest seq any row holds or has held: a row inserted later has a higher one. */
  seqHighWater(): number;

  totals(): StoreTotals;
  /** Ready rows whose visible time is after `nowMs`. */
  countDelayed(nowMs: number): number;
  /** Whether at least `count` ready rows are due at `nowMs` (reads no more than `count` of them). */
  hasDue(nowMs: number, count: number): boolean;
  /** How many ready messages are due at `nowMs`, counted up to `atMost` (and no further). */
  dueCount(nowMs: number, atMost: number): number;
  /** Entry time of the oldest ready or leased row. */
  oldestBacklogEnqueuedAt(): number | null;
  /** Visible time of the earliest ready row, due or not. */
  earliestReadyDueAt(): number | null;
  dueTimes(): DueTimes;
  /** Earliest visible time of a delayed ready row (after `nowMs`). */
  nextVisibleAt(nowMs: number): number | null;
  /** Entry time of the newest row; the cell's clock never runs behind it. */
  newestEnqueuedAt(): number | null;

  getMeta(key: string): string | undefined;
  setMeta(key: string, value: string): void;
  /** Forgets received ids (dead-letter moves into this cell) older than `cutoffMs`. */
  sweepReceivedBefore(cutoffMs: number): number;

  close(): void;
}
