import { performance } from "node:perf_hooks";
import type { SendTrace } from "@celld/queue-cell";

/**
 * Where one producer call's time went in celld's Node process, in ms, from the moment its request
 * headers were read to the moment its answer was written (what `npm run bench host` prints as the
 * stages of a sendBatch). What lies before and after (the Worker, workerd, the socket) is the
 * caller's total less `totalMs`.
 */
export interface SendStages {
  call: "send" | "sendBatch";
  messages: number;
  /** The request's body read whole. */
  readMs: number;
  /** Its messages decoded and checked (base64, content types, JSON). */
  decodeMs: number;
  /** Waiting for the cell's next group to start: calls arriving together share one. */
  waitMs: number;
  /** The group's transaction, this call's rows among the others'. */
  commitMs: number;
  /** The group's log flushed to disk (fdatasync on the thread pool), and the event loop back to it. */
  flushMs: number;
  /** The answer built and written. */
  answerMs: number;
  totalMs: number;
}

/** Takes the moments of one call; made only when someone asked for the stages. */
export class SendStageTimer implements SendTrace {
  readonly #start = performance.now();
  #read = this.#start;
  #decoded = this.#start;
  #groupStarted = this.#start;
  #committed = this.#start;
  #durable = this.#start;

  bodyRead(): void {
    this.#read = performance.now();
  }

  decoded(): void {
    this.#decoded = performance.now();
  }

  groupStarted(): void {
    this.#groupStarted = performance.now();
  }

  committed(): void {
    this.#committed = performance.now();
  }

  durable(): void {
    this.#durable = performance.now();
  }

  /** After the answer is written: the stages, or undefined for a call that never reached a commit. */
  answered(call: SendStages["call"], messages: number): SendStages | undefined {
    const end = performance.now();
    if (this.#committed === this.#start) return undefined;
    return {
      call,
      messages,
      readMs: this.#read - this.#start,
      decodeMs: this.#decoded - this.#read,
      waitMs: this.#groupStarted - this.#decoded,
      commitMs: this.#committed - this.#groupStarted,
      flushMs: this.#durable - this.#committed,
      answerMs: end - this.#durable,
      totalMs: end - this.#start,
    };
  }
}
