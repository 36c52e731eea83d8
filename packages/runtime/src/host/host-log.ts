import { BackgroundWorkError, isCellError } from "@celld/queue-cell";

/** Where the host writes what an operator should see. Tests pass a collecting log. */
export interface HostLog {
  info(message: string): void;
  warn(message: string): void;
  error(message: string, error?: unknown): void;
  /** A line workerd printed: a Worker's console output, or workerd's own warnings. */
  runtime(line: string, stream: "stdout" | "stderr"): void;
}

export const consoleHostLog: HostLog = {
  info: (message) => console.log(`[celld] ${message}`),
  warn: (message) => console.warn(`[celld] warning: ${message}`),
  error: (message, error) => {
    const detail = error instanceof Error ? (error.stack ?? error.message) : error === undefined ? "" : String(error);
    console.error(`[celld] error: ${message}${detail === "" ? "" : `\n${detail}`}`);
  },
  runtime: (line, stream) => (stream === "stdout" ? process.stdout : process.stderr).write(`${line}\n`),
};

/** Keeps every line; for tests that check what the host reported. */
export class MemoryHostLog implements HostLog {
  readonly lines: string[] = [];
  info(message: string): void {
    this.lines.push(`info: ${message}`);
  }
  warn(message: string): void {
    this.lines.push(`warn: ${message}`);
  }
  error(message: string, error?: unknown): void {
    this.lines.push(`error: ${message}${error === undefined ? "" : ` ${String(error)}`}`);
  }
  runtime(line: string, stream: "stdout" | "stderr"): void {
    this.lines.push(`${stream}: ${line}`);
  }
}

/**
 * A queue cell's background work that failed and will be retried (a dead-letter move, a
 * checkpoint), as one line naming the queue and the work. A storage failure (a full disk) is the
 * operator's matter and its line names the cause: a stack would say nothing more, at every retry.
 * Anything else is a bug, logged with its stack.
 */
export function logCellBackgroundError(log: HostLog, error: unknown): void {
  if (!(error instanceof BackgroundWorkError)) {
    log.error("a queue cell's background work failed; it will be retried", error);
  } else if (isCellError(error.cause, "ERR_STORAGE")) {
    log.error(error.message);
  } else {
    log.error(error.message, error.cause);
  }
}
