import type {
  BacklogMetrics,
  CellCounts,
  DeadMessage,
  LeaseOptions,
  LeaseRef,
  NackRef,
  PeekedMessage,
  ReplayRange,
  SendResult,
  SettleResult,
} from "./cell-calls.ts";
import type { QueueConfig } from "./cell-config.ts";
import type { OutgoingMessage, SendOptions } from "./send-input.ts";
import type { LeasedMessage, StoredMessage } from "./store.ts";

/**
 * One queue's cell as its users (the runtime, the bindings, the bench) reach it: CellCore on the
 * same thread, or a RemoteCell (threads/remote-cell.ts) whose cell runs on a worker thread. Users
 * name this type, not the class, so either may serve them. See CellCore for what each does.
 */
export interface Cell {
  readonly name: string;
  /** The settings in force (a RemoteCell's is a mirror, current as of the thread's last message). */
  readonly queueConfig: QueueConfig;
  /** Producer calls between arrival and commit. */
  readonly inFlight: number;
  readonly isClosed: boolean;
  send(messages: readonly OutgoingMessage[], options?: SendOptions): Promise<SendResult>;
  backlogMetrics(): Promise<BacklogMetrics>;
  /** Ready messages, counted up to `atMost`, from what has committed (a hint: see CellCore). */
  readyCount(atMost: number): number;
  lease(options: LeaseOptions): Promise<LeasedMessage[]>;
  expireLeasesOf(owner: number): Promise<number>;
  ack(refs: readonly LeaseRef[]): Promise<SettleResult>;
  nack(refs: readonly NackRef[]): Promise<SettleResult>;
  settle(input: { acks?: readonly LeaseRef[]; nacks?: readonly NackRef[] }): Promise<SettleResult>;
  release(refs: readonly LeaseRef[]): Promise<{ released: number; staleLeases: LeaseRef[] }>;
  replay(range?: ReplayRange): Promise<{ replayed: number }>;
  purge(scope?: "dead" | "all", cut?: { seqAtMost: number }): Promise<{ purged: number }>;
  purgeCut(): Promise<{ seqAtMost: number }>;
  counts(): Promise<CellCounts>;
  /** The counts from what has committed, without a write-loop group. */
  committedCounts(): CellCounts;
  listDead(options?: { afterSeq?: number; limit?: number }): Promise<DeadMessage[]>;
  peekReady(options?: { afterSeq?: number; limit?: number }): Promise<PeekedMessage[]>;
  /** Told each time delivery is paused or resumed. Returns the unsubscribe. */
  onDeliveryPausedChange(listener: (config: QueueConfig) => void): () => void;
  configure(input: Partial<QueueConfig>): Promise<QueueConfig>;
  tick(): Promise<void>;
  receiveDeadLetters(messages: readonly StoredMessage[]): Promise<number>;
  close(): Promise<void>;
  /** The cell's time, ms (never going back). */
  now(): number;
  /** When the cell last did anything, if nothing is going on that needs it open; else undefined. */
  idleSince(): number | undefined;
}

/**
 * Every queue's cell of a data directory, opened lazily: CellRegistry (cells on this thread) or
 * ThreadedCellRegistry (cells on worker threads). See CellRegistry for what each does.
 */
export interface QueueCells {
  open(name: string, config?: Partial<QueueConfig>): Promise<Cell>;
  openExisting(name: string): Promise<Cell | undefined>;
  /** Keeps `name`'s cell open until the returned function is called. */
  hold(name: string): () => void;
  openCells(): Cell[];
  openNames(): string[];
  storedNames(): string[];
  diskUsage(): { queues: number; bytes: number };
  drop(name: string): Promise<void>;
  close(name: string): Promise<void>;
  closeAll(): Promise<void>;
  closeIdle(idleMs: number): Promise<string[]>;
  pathOf(name: string): string;
}
