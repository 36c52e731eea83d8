import type { Clock, DeadLetterPolicy } from "@celld/queue-cell";

/**
 * How long a failure, once printed, is counted instead of printed again. A consumer that fails
 * every batch fails hundreds of times a second, about three lines each (measured: 125 KB of log a
 * second at 1,000 messages a second), and journald's rate limit then drops lines, celld's own
 * warnings among them. A minute keeps such a storm to a few lines a minute while a new error
 * still shows at once.
 */
export const repeatedFailureWindowMs = 60_000;

/**
 * Different errors of one queue printed in full within a window, at most. An error whose message
 * names its message or job (`job 01K... failed`) is a new error at every batch, and without a bound
 * would be printed every time, as before the window; past this the rest are counted in one summary.
 */
export const distinctErrorsPrintedMax = 5;

/**
 * Batches whose handler's error has been reported and whose fate has not yet come back, at most.
 * The two travel apart (the error on workerd's stderr, the fate in the dispatch Worker's answer);
 * an error whose fate never comes (the wall time fired first, workerd died) must not stay for good.
 */
export const awaitedFatesMax = 4_096;

/**
 * How long a failed batch's fate waits for its handler's error when it comes first. The error is
 * one line on workerd's stderr, written before workerd answers the dispatch Worker, and the fate
 * comes only once the batch's settle is written; but the two travel different pipes, and nothing
 * orders them. Measured with real workerd on 2 cores, 18,000 failing batches (up to 250 at once,
 * 5,000 of them each writing 120 KB of the Worker's own stderr): no fate came first, and the error
 * led its fate by 2 to 17 ms (median), 263 ms at most. A second covers the reverse with room to
 * spare, and is how late a fate whose error never comes (a consumer the shim does not wrap, a
 * module without a queue() handler) is printed.
 */
export const fateWaitForErrorMs = 1_000;

/**
 * Fates waiting for their error, at most: a consumer failing a thousand batches a second with no
 * error reported holds about a thousand. Past the bound, the one that has waited longest goes by
 * its outcome at once rather than wait out its second.
 */
export const waitingFatesMax = 4_096;

/**
 * What a consumer's lines call the code that runs its batches, in the words its author wrote it
 * in: a module Worker's queue() handler, or a service-worker script's "queue" event listener.
 */
export const consumerHandlerWords = { module: "the queue() handler", "service-worker": 'the "queue" event listener' } as const;

/** A BatchFate's kind for a batch whose handler returned having retry()d messages on their last delivery (retriedPastLastFate). */
export const retriedPastLastKind = "retried";

/** How a consumer Worker is written, for consumerHandlerWords. */
export type ConsumerKind = keyof typeof consumerHandlerWords;

/** What became of one failed batch's messages, for the dispatcher's line and for the sums. */
export interface BatchFate {
  queue: string;
  /** The batch's first message id: the shim names the same id with the error it reports. */
  tag: string;
  /** Why it failed when no error was reported for it: "exception", "wall-time", "exceededCpu", ... */
  kind: string;
  /** What the summary calls the failure; `failed (<kind>)` when absent. */
  about?: string | undefined;
  /** The line the dispatcher would print for this batch, said once per window. */
  line: string;
  size: number;
  /** Acked explicitly before the handler failed, or all the rest when it returned (see failedFate). */
  acked: number;
  retried: number;
  deadLettered: number;
  deadLetter: DeadLetterPolicy;
}

interface Window {
  queue: string;
  /** One error, one outcome without an error, or every error of the queue past the first few. */
  kind: "error" | "outcome" | "overflow";
  /** What the summary calls the failure: the error's first line, or the outcome. */
  about: string;
  endsAtMs: number;
  cancelTimer: () => void;
  /** Errors not printed since the one that opened the window. */
  errorsUnprinted: number;
  fateShown: boolean;
  /** Fates not printed: their batches and messages. */
  batches: number;
  size: number;
  acked: number;
  retried: number;
  deadLettered: number;
  deadLetter: DeadLetterPolicy | undefined;
  /** Its fates are of retriedPastLastKind, and are summed up in retriedPastLastFate's words. */
  retriedPastLast: boolean;
}

/**
 * Bounds what a consumer that keeps failing writes to the log, without hiding what its author
 * needs. The first failure of each queue and error (its first line, first stack frame and causes'
 * first lines) is printed in full, with the dispatcher's line on what became of its messages;
 * further failures alike within `windowMs` are counted; when the window ends (on its timer, at the
 * next failure after it, or at flush()), one line says how many more there were and what became of
 * their messages. A different error opens a window of its own, so it is printed at once, up to
 * distinctErrorsPrintedMax of a queue; past them, one window counts the rest. A Worker's own
 * console output never comes here.
 */
export class ConsumerFailureLog {
  private readonly windows = new Map<string, Window>();
  /** A reported error's window, by its batch (batchKey), until that batch's fate comes. */
  private readonly awaited = new Map<string, string>();
  /** Fates of batches that threw whose error has not come yet, by batch (batchKey), oldest first. */
  private readonly waiting = new Map<string, { fate: BatchFate; untilMs: number }>();
  /** Ends the wait of the oldest waiting fate; undefined while none waits. */
  private cancelWaitTimer: (() => void) | undefined;
  /** How each queue's consumer is written, where it is not a module Worker (consumedBy). */
  private readonly kinds = new Map<string, ConsumerKind>();

  constructor(
    private readonly clock: Clock,
    private readonly out: {
      /** The shim's report of a thrown error, as it printed it. */
      report(text: string): void;
      warn(message: string): void;
    },
    private readonly windowMs = repeatedFailureWindowMs,
  ) {}

  /** `queue`'s consumer is written as `kind`: its lines name its handler so (a module's queue() handler until said). */
  consumedBy(queue: string, kind: ConsumerKind): void {
    this.kinds.set(queue, kind);
  }

  private handler(queue: string): string {
    return consumerHandlerWords[this.kinds.get(queue) ?? "module"];
  }

  /** The handler of `queue` threw for the batch `tag`; `text` is the shim's report. */
  handlerThrew(queue: string, tag: string, text: string): void {
    const lines = text.split("\n");
    const firstFrame = lines.find((l) => /^\s+at /.test(l)) ?? "";
    // An error rethrown with { cause } from one line reads the same whatever went wrong under it:
    // its causes' first lines tell one failure from another.
    const causes = lines.filter((l) => l.startsWith("Caused by: "));
    let key = JSON.stringify([queue, lines[0], firstFrame, ...causes]);
    let window = this.current(key);
    if (window === undefined && this.errorsPrinted(queue) >= distinctErrorsPrintedMax) {
      key = JSON.stringify([queue, "overflow"]);
      window = this.current(key);
      if (window === undefined) {
        window = this.open(key, queue, "overflow", "threw other errors");
        // Its fates are counted too: the line below stands for each batch's.
        window.fateShown = true;
        this.out.warn(
          `queue "${queue}": ${this.handler(queue)} threw ${distinctErrorsPrintedMax} different errors within ${this.windowMs / 1000} s; ` +
            "the errors it throws next are counted, not printed, until that time has passed",
        );
      }
      window.errorsUnprinted += 1;
    } else if (window === undefined) {
      // The summary names the error as thrown, without the report's lead ("[celld] ... threw: ").
      this.open(key, queue, "error", `threw ${(lines[0] ?? "").replace(/^\[celld\] .*? (?:threw|rejected): /, "")}`);
      this.out.report(text);
    } else {
      window.errorsUnprinted += 1;
    }
    if (tag === "") return;
    const batch = batchKey(queue, tag);
    const waiting = this.waiting.get(batch);
    if (waiting !== undefined) {
      this.waiting.delete(batch);
      this.settled(waiting.fate, key);
      return;
    }
    // Oldest first: what has waited longest is the likeliest never to be answered.
    if (this.awaited.size >= awaitedFatesMax) this.awaited.delete(this.awaited.keys().next().value!);
    this.awaited.set(batch, key);
  }

  /**
   * A batch failed and was settled: its line, or a count in its error's window. A batch that threw
   * and whose error has not come yet waits for it, up to fateWaitForErrorMs.
   */
  batchFailed(fate: BatchFate): void {
    const batch = batchKey(fate.queue, fate.tag);
    const errorKey = this.awaited.get(batch);
    if (errorKey !== undefined) {
      this.awaited.delete(batch);
      this.settled(fate, errorKey);
    } else if (fate.kind === "exception" && fate.tag !== "") {
      // Only a throw is reported by the shim: a batch that ran out of time or CPU has no error to wait for.
      if (this.waiting.size >= waitingFatesMax) this.stopWaiting(this.waiting.keys().next().value!);
      this.waiting.set(batch, { fate, untilMs: this.clock.now() + fateWaitForErrorMs });
      this.cancelWaitTimer ??= this.clock.schedule(this.clock.now() + fateWaitForErrorMs, () => this.waitsEnded());
    } else {
      this.settled(fate, undefined);
    }
  }

  /** The fates whose wait is over go by their outcome; the timer is set again for the next. */
  private waitsEnded(): void {
    this.cancelWaitTimer = undefined;
    const now = this.clock.now();
    for (const [batch, { untilMs }] of this.waiting) {
      if (untilMs > now) {
        this.cancelWaitTimer = this.clock.schedule(untilMs, () => this.waitsEnded());
        return;
      }
      this.stopWaiting(batch);
    }
  }

  private stopWaiting(batch: string): void {
    const waiting = this.waiting.get(batch);
    if (waiting === undefined) return;
    this.waiting.delete(batch);
    this.settled(waiting.fate, undefined);
  }

  /** `errorKey`: the window of the error reported for the fate's batch, if one was. */
  private settled(fate: BatchFate, errorKey: string | undefined): void {
    // An error's window may have closed between the error and its fate (in a storm, the minute
    // often ends while a batch is being settled). The fate then goes by its outcome, as one whose
    // error never came: a window opened under the error's key would count the error's next
    // failures as that window's, so the error would not be printed for a minute, and past the
    // distinct errors' bound the overflow's notice would not be printed either.
    const errorWindow = errorKey === undefined ? undefined : this.current(errorKey);
    const key = JSON.stringify([fate.queue, `outcome:${fate.kind}`]);
    const window = errorWindow ?? this.current(key) ?? this.open(key, fate.queue, "outcome", fate.about ?? `failed (${fate.kind})`, fate.kind === retriedPastLastKind);
    if (!window.fateShown) {
      window.fateShown = true;
      this.out.warn(fate.line);
      return;
    }
    window.batches += 1;
    window.size += fate.size;
    window.acked += fate.acked;
    window.retried += fate.retried;
    window.deadLettered += fate.deadLettered;
    window.deadLetter = fate.deadLetter;
  }

  /** Ends every window now, each with its summary (celld is stopping). */
  flush(): void {
    for (const batch of [...this.waiting.keys()]) this.stopWaiting(batch);
    this.cancelWaitTimer?.();
    this.cancelWaitTimer = undefined;
    for (const key of [...this.windows.keys()]) this.close(key);
    this.awaited.clear();
  }

  private current(key: string): Window | undefined {
    const window = this.windows.get(key);
    if (window === undefined) return undefined;
    if (this.clock.now() < window.endsAtMs) return window;
    // Its timer has not run yet (a busy loop, or a fake clock moved past it).
    this.close(key);
    return undefined;
  }

  /** Different errors of `queue` printed in full in windows still open. */
  private errorsPrinted(queue: string): number {
    let n = 0;
    for (const key of [...this.windows.keys()]) {
      const window = this.current(key);
      if (window?.queue === queue && window.kind === "error") n += 1;
    }
    return n;
  }

  private open(key: string, queue: string, kind: Window["kind"], about: string, retriedPastLast = false): Window {
    const endsAtMs = this.clock.now() + this.windowMs;
    const window: Window = {
      queue,
      kind,
      about,
      endsAtMs,
      cancelTimer: this.clock.schedule(endsAtMs, () => this.close(key)),
      errorsUnprinted: 0,
      fateShown: false,
      batches: 0,
      size: 0,
      acked: 0,
      retried: 0,
      deadLettered: 0,
      deadLetter: undefined,
      retriedPastLast,
    };
    this.windows.set(key, window);
    return window;
  }

  private close(key: string): void {
    const window = this.windows.get(key);
    if (window === undefined) return;
    this.windows.delete(key);
    window.cancelTimer();
    if (window.errorsUnprinted === 0 && window.batches === 0) return;
    const seconds = this.windowMs / 1000;
    const times = Math.max(window.errorsUnprinted, window.batches);
    const fate =
      window.batches === 0 || window.deadLetter === undefined
        ? ""
        : window.retriedPastLast
          ? `; in all, it ${retriedPastLastFate(window, window.deadLetter)}`
          : `; of their batches' messages, ${failedFate(window.size, window, window.deadLetter)}`;
    this.out.warn(
      window.kind === "overflow"
        ? `queue "${window.queue}": ${this.handler(window.queue)} threw ${times} other error(s) within ${seconds} s of the notice above, not printed${fate}`
        : `queue "${window.queue}": ${this.handler(window.queue)} ${window.about} ${times} more time(s) within ${seconds} s of the ` +
            `report above, not printed again${fate}`,
    );
  }
}

/** A batch, as the error and the fate both name it: by its queue too, so that one queue's report cannot take another's fate. */
const batchKey = (queue: string, tag: string): string => JSON.stringify([queue, tag]);

/** What became of a failed batch, in words: retried, and gone after their last delivery. */
export function failedFate(
  size: number,
  { acked, retried, deadLettered }: { acked: number; retried: number; deadLettered: number },
  deadLetter: DeadLetterPolicy,
): string {
  const parts = [`${retried} of ${size} message(s) will be retried`];
  // Said only when some were: a batch that failed whole acked none, and that is the usual case.
  if (acked > 0) parts.push(ackedWords(acked));
  if (deadLettered > 0) parts.push(`${deadLettered} had no retries left and ${whereDeadLettersWent(deadLetter, deadLettered)}`);
  return parts.join("; ");
}

/**
 * A batch whose handler returned, having called retry() on messages on their last delivery: they
 * were dead-lettered as the handler asked, which the plain fate's "0 of 1 message(s) will be
 * retried" made read like a contradiction (the example's own `/fail` job showed it first). A
 * window's summary of such batches leaves `maxRetries` out: the line that opened it said it.
 */
export function retriedPastLastFate(
  { acked, retried, deadLettered }: { acked: number; retried: number; deadLettered: number },
  deadLetter: DeadLetterPolicy,
  maxRetries?: number,
): string {
  const one = deadLettered === 1;
  const bound = maxRetries === undefined ? "" : ` (max_retries = ${maxRetries})`;
  const parts = [
    `retried ${deadLettered} message${one ? "" : "s"} on ${one ? "its" : "their"} last delivery${bound}, ` +
      `so ${one ? "it" : "they"} ${whereDeadLettersWent(deadLetter, deadLettered)}`,
  ];
  if (retried > 0) parts.push(`${retried} other message(s) will be retried`);
  if (acked > 0) parts.push(ackedWords(acked));
  return parts.join("; ");
}

const ackedWords = (acked: number): string => `${acked} ${acked === 1 ? "was" : "were"} acked`;

function whereDeadLettersWent(deadLetter: DeadLetterPolicy, count: number): string {
  switch (deadLetter.kind) {
    case "queue":
      return `went to the dead-letter queue "${deadLetter.queue}"`;
    case "delete":
      return `${count === 1 ? "was" : "were"} deleted (the consumer names no dead_letter_queue)`;
    case "set":
      return "went to the queue's dead-letter set";
  }
}
