/**
 * How the handler shim hands a queue() handler's error to the host: one line on workerd's stderr,
 * this prefix and then JSON `{"queue","tag","text"}`, where text is the report as the shim would
 * print it (its lines joined by "\n") and tag the batch's first message id. One line, so that the
 * report's stack cannot be split from it or interleaved with another Worker's output on the way.
 * The host never shows the line itself: it prints the report, or counts it (ConsumerFailureLog).
 */
export const queueErrorPrefix = "[celld:queue-error] ";

export interface QueueErrorRecord {
  queue: string;
  tag: string;
  text: string;
}

/** The record in a line of workerd's stderr, or undefined for any other line (a Worker's own). */
export function queueErrorRecord(line: string): QueueErrorRecord | undefined {
  if (!line.startsWith(queueErrorPrefix)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line.slice(queueErrorPrefix.length));
  } catch {
    return undefined;
  }
  const record = value as Partial<QueueErrorRecord> | null;
  if (typeof record?.queue !== "string" || typeof record.tag !== "string" || typeof record.text !== "string") return undefined;
  return { queue: record.queue, tag: record.tag, text: record.text };
}
