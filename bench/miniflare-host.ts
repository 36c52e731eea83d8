/**
 * The baseline under benchmark, in its own process (see host-process.ts): Miniflare's own
 * in-memory queue broker running the same Worker script with the same consumer settings. This
 * process must never load celld, whose queue wiring removes that broker from Miniflare.
 *
 * Consumption is read from the broker's own per-batch log line (`QUEUE jobs 100/100 (3ms)`),
 * which it sends to Node after applying each batch's outcome whatever the log level, so counting
 * it adds no work to the baseline.
 */
import { Log, LogLevel, Miniflare } from "miniflare";
import { benchCompatibilityDate, benchConsumer, benchQueue, benchWorkerName, benchWorkerScript } from "./bench-workers.ts";
import { serveHost } from "./host-process.ts";

const batchLine = /QUEUE (\S+) (\d+)\/(\d+)/;
const ansi = /\x1b\[[0-9;]*m/g;

class ConsumedLog extends Log {
  constructor(private readonly onAcked: (count: number) => void) {
    super(LogLevel.WARN);
  }

  override logWithLevel(level: LogLevel, message: string): void {
    const batch = batchLine.exec(message.replace(ansi, ""));
    if (batch !== null && batch[1] === benchQueue) {
      this.onAcked(Number(batch[2]));
      return;
    }
    super.logWithLevel(level, message);
  }
}

serveHost(async (consumed) => {
  const mf = new Miniflare({
    workers: [
      {
        name: benchWorkerName,
        modules: true,
        script: benchWorkerScript,
        compatibilityDate: benchCompatibilityDate,
        queueProducers: { JOBS: { queueName: benchQueue } },
        queueConsumers: {
          [benchQueue]: {
            maxBatchSize: benchConsumer.maxBatchSize,
            maxBatchTimeout: benchConsumer.maxBatchTimeoutSeconds,
            maxRetries: benchConsumer.maxRetries,
          },
        },
      },
    ],
    cf: false,
    host: "127.0.0.1",
    port: 0,
    log: new ConsumedLog(consumed),
  });
  try {
    const url = await mf.ready;
    return { url, close: () => mf.dispose() };
  } catch (error) {
    await mf.dispose().catch(() => undefined);
    throw error;
  }
});
