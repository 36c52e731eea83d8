import type { CellCounts } from "../cell-calls.ts";
import type { QueueConfig } from "../cell-config.ts";
import type { CellTally } from "../cell-observer.ts";
import type { SystemClockOrigin } from "../clock.ts";
import type { Durability } from "../sqlite-file.ts";
import type { StoredMessage } from "../store.ts";
import type { ErrorData } from "./error-transport.ts";

/**
 * The messages between the main thread and a cell thread (threaded-registry.ts and
 * cell-thread-server.ts), over the Worker's port. Calls carry an id their answer names. A caller's
 * bodies are never transferred (a Uint8Array may be a view of a buffer it keeps using, such as
 * Node's shared pool, which a transfer would take from under it): a send's messages, a lease's
 * answer and lease refs are copied by field into buffers built for the crossing, which are
 * transferred (message-columns.ts); the rest crosses as structured clones.
 */

/** What a cell thread is started with (its workerData). */
export interface CellThreadParameters {
  /** This thread's index among the registry's threads. */
  thread: number;
  threads: number;
  dataDir: string;
  durability: Durability | undefined;
  idleCloseMs: number | undefined;
  openCellsMax: number | undefined;
  /** The main thread counts committed tallies (it has an observer): forward them. */
  forwardTallies: boolean;
  /** The main thread times flushes: time each fdatasync and forward the durations. */
  forwardSyncTimes: boolean;
  /** The main thread's systemClock, adopted by the thread so both read the same time. */
  clockOrigin: SystemClockOrigin;
}

/** The methods of a cell a RemoteCell calls on the thread (every async member of Cell). */
export type CellMethod =
  | "send"
  | "backlogMetrics"
  | "lease"
  | "expireLeasesOf"
  | "ack"
  | "nack"
  | "settle"
  | "release"
  | "replay"
  | "purge"
  | "purgeCut"
  | "counts"
  | "listDead"
  | "peekReady"
  | "configure"
  | "tick"
  | "receiveDeadLetters"
  | "close";

export type RegistryMethod = "open" | "openExisting" | "drop" | "close" | "closeIdle" | "closeAll" | "threadCpu";

/**
 * What the main thread's synchronous members of a RemoteCell answer from: the thread's cell as of
 * its last message (see RemoteCell for why each one's lag is harmless).
 */
export interface CellMirror {
  config: QueueConfig;
  counts: CellCounts;
  /** The cell's time minus systemClock.now(), which the thread reads as main does (CellTime runs ahead after a clock went back). */
  nowOffsetMs: number;
  idleSince: number | undefined;
}

/** A cell as an open answers it: the thread's handle for it (one per cell object) and its mirror. */
export interface CellHandle {
  handle: number;
  name: string;
  mirror: CellMirror;
}

export type ToThread =
  /**
   * A call of a cell's method. `name` words a refusal if the cell closed meanwhile; `abortable`:
   * args[0] takes the thread's own signal (a lease's), `aborted` if the caller's already was.
   */
  | { kind: "call"; id: number; handle: number; name: string; method: CellMethod; args: unknown[]; abortable?: boolean; aborted?: boolean }
  /** The main side's signal of a waiting lease aborted: abort the thread's own. */
  | { kind: "cancel"; id: number }
  | { kind: "registry"; id: number; method: RegistryMethod; args: unknown[] }
  | { kind: "hold"; hold: number; name: string }
  | { kind: "unhold"; hold: number }
  /** The answer to a request of the thread's (FromThread "request"). */
  | Answer;

export type Answer =
  | { kind: "answer"; id: number; ok: true; value: unknown; update?: CellUpdate }
  | { kind: "answer"; id: number; ok: false; error: ErrorData; update?: CellUpdate };

/** A mirror as an update carries it: the settings only when they changed since the last one told. */
export type MirrorUpdate = Omit<CellMirror, "config"> & { config?: CellMirror["config"] };

/** What changed of one cell: sent with the answer of a call of its, or by itself after a while. */
export interface CellUpdate {
  handle: number;
  name: string;
  mirror?: MirrorUpdate;
  /** Committed tallies since the last update, summed (only when forwardTallies). */
  tally?: CellTally;
}

export type FromThread =
  | Answer
  | { kind: "updates"; updates: CellUpdate[]; syncSeconds?: number[] }
  /** Delivery was paused or resumed (configure): the RemoteCell tells its listeners. */
  | { kind: "pausedChange"; handle: number; mirror: CellMirror }
  | { kind: "closing"; handle: number }
  | { kind: "backgroundError"; error: ErrorData }
  | { kind: "warning"; message: string }
  /** A dead-letter move's target owned by another thread, asked of the main thread. */
  | { kind: "request"; id: number; method: "targetExists"; name: string }
  | { kind: "request"; id: number; method: "receiveDeadLetters"; name: string; messages: StoredMessage[] };
