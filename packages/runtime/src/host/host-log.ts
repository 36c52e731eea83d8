import { BackgroundWorkError, isCellError } from "@celld/queue-cell";

/** Where the host writes what an operator should see. Tests pass a collecting log. */
export interface HostLog {
  info(message: string): void;
  warn(message: string): void;
  error(message: string, error?: unknown): void;
  /** A line workerd printed: a Worker's console output, or workerd's own warnings. */
  runtime(line: string, stream: "stdout" | "stderr"): void;
}

type StreamName = "stdout" | "stderr";
const streams = { stdout: process.stdout, stderr: process.stderr };
/** Streams whose reader has gone (a pipe into `head` that ended): written to no more. */
const closedStreams = new Set<StreamName>();

/**
 * A line for `name`, or for the other stream once `name` has closed, so that what celld says as
 * it stops still reaches whichever of the two is left.
 */
function writeLine(name: StreamName, text: string): void {
  const target = closedStreams.has(name) ? (name === "stdout" ? "stderr" : "stdout") : name;
  if (!closedStreams.has(target)) streams[target].write(`${text}\n`);
}

export const consoleHostLog: HostLog = {
  info: (message) => writeLine("stdout", `[celld] ${message}`),
  warn: (message) => writeLine("stderr", `[celld] warning: ${message}`),
  error: (message, error) => {
    const detail = error instanceof Error ? (error.stack ?? error.message) : error === undefined ? "" : String(error);
    writeLine("stderr", `[celld] error: ${message}${detail === "" ? "" : `\n${detail}`}`);
  },
  runtime: (line, stream) => writeLine(stream, line),
};

/**
 * Calls `closed` once, when stdout or stderr fails (EPIPE: the reader of a pipe is gone). Node
 * ignores SIGPIPE, so the failed write surfaces as an 'error' event on the stream, and with no
 * listener that event ends the process at once, as a crash: no batch handed back, sockets left in
 * run/. Once listened for, the stream is written to no more and the caller can stop cleanly.
 */
export function watchOutputStreams(closed: (stream: StreamName, code: string) => void): void {
  let told = false;
  for (const name of ["stdout", "stderr"] as const) {
    streams[name].on("error", (error: NodeJS.ErrnoException) => {
      closedStreams.add(name);
      if (told) return;
      told = true;
      closed(name, error.code ?? error.message);
    });
  }
}

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
