import type { ConsumerFailureLog } from "@celld/bindings";
import type { ConfigIssue, WorkerConfig } from "../config/index.ts";
import type { HostLog } from "../host/host-log.ts";
import type { QueueErrorMarks } from "../worker-code/queue-error-record.ts";
import type { ServiceWorkerConsole } from "../worker-code/service-worker-console.ts";
import { RuntimeOutputFilter } from "./runtime-output.ts";
import { StartBlame } from "./runtime-start.ts";
import type { StackPositions } from "./stack-positions.ts";

export interface RuntimeLinesDeps {
  log: HostLog;
  workers: readonly WorkerConfig[];
  positions: StackPositions;
  marks: QueueErrorMarks;
  failures: ConsumerFailureLog;
  /** Only a service-worker script needs workerd verbose (see ServiceWorkerConsole). */
  serviceWorkerConsole: ServiceWorkerConsole | undefined;
}

/**
 * Where each line workerd prints goes: a shim's queue-error record to the failure log, a refused
 * start's lines to its blame, repeated lines dropped, the rest to the host log with the bundle's
 * positions mapped to the author's files.
 */
export class RuntimeLines {
  private readonly output = new RuntimeOutputFilter();
  /** Until workerd has started: what its output says of a refused start. */
  private blame: StartBlame | undefined;

  constructor(private readonly deps: RuntimeLinesDeps) {
    this.blame = new StartBlame(deps.workers);
  }

  /** The config issues workerd's lines named while it refused to start. */
  get startIssues(): readonly ConfigIssue[] {
    return this.blame?.issues ?? [];
  }

  /** workerd has started: its lines no longer explain a refused start. */
  started(): void {
    this.blame = undefined;
  }

  forward(line: string, stream: "stdout" | "stderr"): void {
    if (stream === "stderr") {
      this.blame?.read(line);
      const logged = this.deps.serviceWorkerConsole?.read(line);
      if (logged === "drop") return;
      // A service-worker script's shim writes its records and reports through its console.
      if (logged !== undefined) {
        if (!this.forwardRecord(logged.output)) this.showConsole(logged.output);
        return;
      }
      if (this.forwardRecord(line)) return;
    }
    this.show(line, stream);
  }

  /** A report of the failure log, printed as workerd's own error lines are. */
  showReport(text: string): void {
    for (const line of text.split("\n")) this.show(line, "stderr");
  }

  private show(line: string, stream: "stdout" | "stderr"): void {
    if (!this.output.shows(line, stream)) return;
    const shown = this.deps.positions.rewrite(line);
    if (shown !== undefined) this.deps.log.runtime(shown, stream);
  }

  /** Whether the line was a shim's queue-error record, now handed on (marks.read). */
  private forwardRecord(line: string): boolean {
    const record = this.deps.marks.read(line);
    if (record === undefined) return false;
    if ("misplaced" in record) this.showReport(record.misplaced);
    else this.deps.failures.handlerThrew(record.queue, record.tag, record.text);
    return true;
  }

  // The shim's reports go where a module Worker's shim's do; the script's own output on stdout.
  private showConsole(output: string): void {
    const stream = output.startsWith("[celld] ") ? "stderr" : "stdout";
    for (const text of output.split("\n")) this.show(text, stream);
  }
}
