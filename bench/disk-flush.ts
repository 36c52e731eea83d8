/**
 * How long one fdatasync takes on the filesystem the bench hosts keep their data on (the OS
 * temporary directory): the floor under a durable send's latency, since celld answers a send only
 * once its log is flushed. Measured in the bench process, sequentially, with nothing else of the
 * bench running: a 4 KiB append and a flush, as a one-message commit does.
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { percentile } from "./host-workloads.ts";

export interface FlushLatency {
  p50: number;
  p99: number;
  /** How many flushes the percentiles are of. */
  samples: number;
}

export function diskFlushLatency(samples = 300): FlushLatency {
  const dir = mkdtempSync(join(tmpdir(), "celld-flush-bench-"));
  const fd = openSync(join(dir, "log"), "w");
  const page = Buffer.alloc(4096, 1);
  const ms: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      writeSync(fd, page);
      const start = performance.now();
      fdatasyncSync(fd);
      ms.push(performance.now() - start);
    }
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), samples };
}
