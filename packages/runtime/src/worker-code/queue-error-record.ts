import { randomBytes } from "node:crypto";

/**
 * How the handler shim hands a queue() handler's error to the host: one line on workerd's stderr,
 * `[celld:queue-error TOKEN] ` and then JSON `{"queue","tag","text"}`, where text is the report as
 * the shim would print it (its lines joined by "\n") and tag the batch's first message id. One
 * line, so that the report's stack cannot be split from it or interleaved with another Worker's
 * output on the way. The host never shows the line itself: it prints the report, or counts it
 * (ConsumerFailureLog).
 *
 * Worker code writes to the same stderr, so the marker must be one it cannot write: a token drawn
 * afresh for each Worker at each start, which only the shim's writer holds (queueErrorWriter), and
 * a record is taken only for a queue its Worker consumes. A Worker can then neither fake nor hide
 * another queue's errors; a line with a wrong token is the Worker's own output, and shown as such.
 */
const markerPattern = /^\[celld:queue-error ([0-9a-f]{32})\] /;

export interface QueueErrorRecord {
  queue: string;
  tag: string;
  text: string;
}

/** The tokens of one host's Workers, and what each Worker may report on. */
export class QueueErrorMarks {
  private readonly queuesByToken = new Map<string, Set<string>>();

  /** A new token for a Worker that consumes `queues`; goes into its shim. */
  issue(queues: readonly string[]): string {
    const token = randomBytes(16).toString("hex");
    this.queuesByToken.set(token, new Set(queues));
    return token;
  }

  /** The Worker holding `token` consumes `queue` too, from now on (a consumer added through the API). */
  allow(token: string, queue: string): void {
    this.queuesByToken.get(token)?.add(queue);
  }

  /**
   * The record in a line of workerd's stderr; undefined for any other line (a Worker's own,
   * whatever it looks like), to be shown as it is. "misplaced" for a shim's record of a queue its
   * Worker does not consume (the Worker changed what its batch says): its text is shown, not counted.
   */
  read(line: string): QueueErrorRecord | { misplaced: string } | undefined {
    const marker = markerPattern.exec(line);
    const queues = marker === null ? undefined : this.queuesByToken.get(marker[1]!);
    if (marker === null || queues === undefined) return undefined;
    let value: unknown;
    try {
      value = JSON.parse(line.slice(marker[0].length));
    } catch {
      return undefined;
    }
    const record = value as Partial<QueueErrorRecord> | null;
    if (typeof record?.queue !== "string" || typeof record.tag !== "string" || typeof record.text !== "string") return undefined;
    if (!queues.has(record.queue)) return { misplaced: record.text };
    return { queue: record.queue, tag: record.tag, text: record.text };
  }
}

/**
 * The module of the shim that writes records, imported before the Worker's own so that it holds
 * console.error, Reflect.apply and JSON.stringify as workerd made them: Worker code that replaces
 * them later sees no record go by. The token is an argument of a call at its top level, not in
 * the source of the function it exports (which Function.prototype.toString would show) nor in a
 * binding of the bundle's scope. As a data: URL, no path of the Worker's can import it.
 */
export function queueErrorWriter(token: string): string {
  const source =
    "export default ((marker, write, apply, stringify, output) => (record) => void apply(write, output, [marker + stringify(record)]))" +
    `(${JSON.stringify(queueErrorMarker(token))}, console.error, Reflect.apply, JSON.stringify, console);\n`;
  return `data:text/javascript;base64,${Buffer.from(source).toString("base64")}`;
}

/** What starts a record's line for the Worker holding `token`; a shim's writer puts it before the record's JSON. */
export function queueErrorMarker(token: string): string {
  return `[celld:queue-error ${token}] `;
}
