import type { BatchReport } from "@celld/bindings";
import type { HostLog } from "../host/host-log.ts";
import { batchFields, batchLine, requestFields, requestLine, type RequestRecord } from "./activity-lines.ts";
import { JsonHostLog } from "./json-log.ts";

/**
 * `--log-requests`: a line per HTTP request and per queue batch, through the host's log (text or
 * JSON). Without the option nothing is printed, as before.
 */
export class ActivityLog {
  constructor(private readonly log: HostLog) {}

  request(r: RequestRecord): void {
    if (this.log instanceof JsonHostLog) this.log.line("info", requestLine(r), requestFields(r));
    else this.log.info(requestLine(r));
  }

  /** At info whatever its outcome: a failed batch has its own warning from the dispatcher. */
  batch(r: BatchReport): void {
    if (this.log instanceof JsonHostLog) this.log.line("info", batchLine(r), batchFields(r));
    else this.log.info(batchLine(r));
  }
}
