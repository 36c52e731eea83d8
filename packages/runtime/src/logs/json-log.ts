import type { HostLog } from "../host/host-log.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";

/** Where a JSON line goes: stdout for info, stderr for warnings and errors, as the text lines. */
export type LineWriter = (stream: "stdout" | "stderr", line: string) => void;

/**
 * `--log-format json`: every line celld writes as one JSON object (level, time, message, and the
 * Worker, queue and other fields where the line has them), for log shippers. A Worker's own
 * console output is a line of its own too, with `source: "worker"`.
 */
export class JsonHostLog implements HostLog {
  constructor(
    private readonly write: LineWriter = writeToProcess,
    private readonly now: () => Date = () => new Date(),
  ) {}

  info(message: string): void {
    this.line("info", message);
  }

  warn(message: string): void {
    this.line("warn", message);
  }

  error(message: string, error?: unknown): void {
    const fields: Record<string, unknown> = {};
    if (error instanceof Error) fields["error"] = { name: error.name, message: error.message, stack: error.stack };
    else if (error !== undefined) fields["error"] = { message: String(error) };
    this.line("error", message, fields);
  }

  runtime(line: string, stream: "stdout" | "stderr"): void {
    this.line(stream === "stderr" ? "error" : "info", line, { source: "worker", stream });
  }

  /** A line with fields of its own (a request's status, a batch's counts). */
  line(level: LogLevel, message: string, fields: Record<string, unknown> = {}): void {
    const record = { level, time: this.now().toISOString(), message, ...fields };
    this.write(level === "warn" || level === "error" ? "stderr" : "stdout", JSON.stringify(record));
  }
}

function writeToProcess(stream: "stdout" | "stderr", line: string): void {
  const target = stream === "stdout" ? process.stdout : process.stderr;
  // A reader gone (EPIPE) is the host's to notice (watchOutputStreams); the line is dropped.
  if (target.writable) target.write(`${line}\n`);
}
