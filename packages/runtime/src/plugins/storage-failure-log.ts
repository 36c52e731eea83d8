import { damagedFileAdvice, isCellError, type CellError, type Clock } from "@celld/queue-cell";

/** A storage failure is logged once per queue and cause in this long, however many calls it refuses. */
export const storageFailureLogWindowMs = 60_000;

interface Reported {
  /** When the last line for this queue and cause was written. */
  atMs: number;
  /** Failures since then that wrote no line. */
  unlogged: number;
}

/**
 * Tells the operator of the storage failures behind refused calls (the API's 503s, a Worker's
 * `send()` rejected), which are theirs to fix (a full disk, a failing device): once per queue and
 * cause within `windowMs`, however many calls the failure refuses (a full disk refuses every
 * send, hundreds a second), and the next line counts the ones it did not repeat.
 */
export class StorageFailureLog {
  private readonly reported = new Map<string, Reported>();

  constructor(
    private readonly clock: Clock,
    private readonly write: (line: string) => void,
    private readonly windowMs = storageFailureLogWindowMs,
  ) {}

  report(error: CellError): void {
    const storage = error.storage;
    const queue = storage?.queue ?? "(not named)";
    const detail = storage?.detail ?? error.message;
    // A failed flush and the refusals after it share their detail (the flush's error) and state.
    const key = JSON.stringify([queue, detail, storage?.writesStopped ?? false]);
    const now = this.clock.now();
    const last = this.reported.get(key);
    if (last !== undefined && now < last.atMs + this.windowMs) {
      last.unlogged += 1;
      return;
    }
    const state =
      storage === undefined
        ? "the call was refused"
        : storage.writesStopped
          ? "it takes no more writes until celld is restarted"
          : storage.cause === "disk-full"
            ? "its writes are refused until the disk has free space"
            : "the call was refused";
    const since = last !== undefined && last.unlogged > 0 ? ` (${last.unlogged} more like it since ${new Date(last.atMs).toISOString()})` : "";
    const advice = storage === undefined ? "" : damagedFileAdvice(storage);
    this.write(`queue "${queue}": storage failed (${detail}); ${state}${advice}${since}`);
    // Lines whose window has passed are forgotten: the map holds only failures still recent.
    for (const [other, entry] of this.reported) if (now >= entry.atMs + this.windowMs) this.reported.delete(other);
    this.reported.set(key, { atMs: now, unlogged: 0 });
  }
}

/**
 * The storage failures in what a request threw: the error itself, what it wraps (publish wraps
 * its queues' refusals), each of an AggregateError's.
 */
export function storageFailuresIn(thrown: unknown, depth = 0): CellError[] {
  if (depth > 10 || !(thrown instanceof Error)) return [];
  if (isCellError(thrown, "ERR_STORAGE")) return [thrown];
  const inner = thrown instanceof AggregateError ? (thrown.errors as unknown[]) : [thrown.cause];
  return inner.flatMap((e) => storageFailuresIn(e, depth + 1));
}
