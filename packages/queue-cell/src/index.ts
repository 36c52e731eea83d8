export { limits, type Limits } from "./limits.ts";
export {
  CellError,
  BackgroundWorkError,
  damagedFileAdvice,
  isCellError,
  type CellErrorCode,
  type CellErrorDetails,
  type StorageFailure,
  type StorageCause,
} from "./errors.ts";
export { storageCause } from "./storage-failure.ts";
export { systemClock, ManualClock, type Clock } from "./clock.ts";
export { UlidSource, seededRandomFill, newQueueId, type RandomFill } from "./ids.ts";
export {
  defaultQueueConfig,
  resolveQueueConfig,
  type QueueConfig,
  type DeadLetterPolicy,
} from "./cell-config.ts";
export type { OutgoingMessage, SendOptions, SendTrace } from "./send-input.ts";
export { QueueCell, type QueueCellOptions } from "./sqlite-queue-cell.ts";
export type { Cell, QueueCells } from "./cell-surface.ts";
export type {
  BacklogMetrics,
  SendResult,
  LeaseOptions,
  LeaseRef,
  NackRef,
  SettleResult,
  CellCounts,
  DeadMessage,
  PeekedMessage,
  ReplayRange,
} from "./cell-calls.ts";
export { emptyTally, type CellObserver, type CellTally } from "./cell-observer.ts";
export { CellRegistry, type CellRegistryOptions } from "./registry.ts";
export { ThreadedCellRegistry, type ThreadedCellRegistryOptions } from "./threads/threaded-registry.ts";
export { readThreadCpu, type ThreadCpu, type ThreadCpuTimes } from "./threads/thread-cpu.ts";
export { SqliteCellStore } from "./sqlite-store.ts";
export type { Durability, SqliteStoreOptions } from "./sqlite-file.ts";
export type { SyncFile } from "./wal-sync.ts";
export {
  MessageState,
  type CellStore,
  type NewMessage,
  type StoredMessage,
  type LeasedRow,
  type LeasedMessage,
  type MessageHead,
  type StoreTotals,
  type DueTimes,
} from "./store.ts";
