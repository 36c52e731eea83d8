/**
 * What a cell did, for whoever counts it (the host's metrics). Plain numbers and callbacks: the
 * cell knows nothing of how they are exposed. A tally is told only once its group has committed
 * and is durable, so a count never includes work a failed commit or flush undid.
 */
export interface CellTally {
  /** Messages a send committed. */
  sent: number;
  /** Leases handed out: every delivery of a message counts once. */
  delivered: number;
  acked: number;
  /** Nacked and ready again (after their delay). */
  retried: number;
  /** Moved to the queue's own dead-letter set or towards its dead-letter queue. */
  deadLettered: number;
  /** Failed on their last delivery with no dead-letter queue, and so deleted. */
  deletedAfterLastRetry: number;
  /** Deleted by the four-day retention. */
  expiredByRetention: number;
  /** Leases that ran out (or a host's restart ended) before an ack or a nack. */
  leasesExpired: number;
  /** Acks and nacks not applied: their lease generation was no longer the message's. */
  staleAcksRefused: number;
  /** Dead letters returned to ready. */
  replayed: number;
  /** Messages deleted by a purge. */
  purged: number;
}

export interface CellObserver {
  /** A committed group's tally; never all zeros. */
  committed(tally: Readonly<CellTally>): void;
  /** A send the cell refused, by its CellError code (nothing of it was written). */
  sendRefused(code: string): void;
  /**
   * A send arrived; the function returned is called when it ends, `true` once committed and
   * durable. The cell measures no time itself (its clock may be a test's): the observer does.
   */
  sendStarted(): (committed: boolean) => void;
}

export function emptyTally(): CellTally {
  return {
    sent: 0,
    delivered: 0,
    acked: 0,
    retried: 0,
    deadLettered: 0,
    deletedAfterLastRetry: 0,
    expiredByRetention: 0,
    leasesExpired: 0,
    staleAcksRefused: 0,
    replayed: 0,
    purged: 0,
  };
}

export function isEmptyTally(tally: Readonly<CellTally>): boolean {
  for (const value of Object.values(tally)) if (value !== 0) return false;
  return true;
}
