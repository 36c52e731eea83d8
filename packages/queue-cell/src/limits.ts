/**
 * Every bound celld enforces, in one place. The config schema, the Worker binding, the native API
 * and the cell import these; nothing else may repeat a number. Units are in the names.
 *
 * Cloudflare's figures (developers.cloudflare.com/queues/platform/limits) where Workers meet them;
 * the native API's figures come from the queue product page.
 */
const maxRetriesMax = 100;

export const limits = {
  /** One message, encoded body plus attributes. Cloudflare: 128 KB, where 1 KB = 1000 B. */
  messageBytesMax: 128_000,
  /** One send call (sendBatch, or one native send request). */
  batchMessagesMax: 100,
  /**
   * All messages of one send call together (bodies plus attributes). Cloudflare documents 256 KB;
   * Miniflare allows 288,000 as slack for encoding overhead. celld enforces the documented figure
   * on what it stores.
   */
  batchBytesMax: 256_000,
  /** delaySeconds, delivery_delay, retry_delay, nack delay: 24 h since 2026-02-18. */
  delaySecondsMax: 86_400,

  maxBatchSizeMin: 1,
  maxBatchSizeMax: 100,
  maxBatchSizeDefault: 10,
  batchTimeoutSecondsMax: 60,
  batchTimeoutSecondsDefault: 5,
  maxRetriesMax,
  maxRetriesDefault: 3,
  maxConcurrencyMin: 1,
  maxConcurrencyMax: 250,
  /**
   * celld's own: message body bytes in a host's leased, unsettled consumer batches, above which
   * its consumers start no further batch (each may still run one). All of a consumer's batches
   * share one workerd isolate, which Cloudflare spreads over many: 250 batches of 100 messages of
   * 128 KB would be 3.2 GB there. 25,000 messages of 1 KB stay well under it.
   */
  consumerBatchBytesInFlightMax: 64 * 1024 * 1024,
  /** A consumer invocation's wall time on Cloudflare; a hung handler's lease runs this long. */
  consumerWallTimeSecondsDefault: 900,
  /**
   * A Cron Trigger run's wall time on Cloudflare. workerd sets none; past it celld says so and
   * stops waiting for the run (it still ends with workerd).
   */
  scheduledWallTimeSeconds: 900,

  /**
   * celld's own: cells a host keeps open at once. Opening one more first closes the least
   * recently used idle ones (they reopen on use). An open cell holds openCellFileDescriptors and
   * 400 KB; thousands of open queues exhausted a 20,000 descriptor limit. Cells in use (a
   * consumer, a waiting lease, leased messages) are not closed. The host lowers it to fit the
   * process's descriptor limit (openCellsFileDescriptorShare).
   */
  openCellsMax: 1_000,
  /**
   * File descriptors one open cell holds: its database, log and shared-memory files on two
   * connections (5 measured on Linux; up to 9 while the checkpointer's thread has the file open,
   * from a checkpoint until the log is truncated after 30 s of quiet, when it closes its connection;
   * then 6, as SQLite keeps that connection's descriptor of the file until the writer's closes).
   */
  openCellFileDescriptors: 5,
  /**
   * The share of the process's open-files limit (RLIMIT_NOFILE) that open cells may take; the host
   * lowers openCellsMax to fit. The rest is for sockets: the API's clients, workerd's connections
   * to celld, Miniflare's. At 4,096 descriptors and 1,000 cells of 5, queue number 800 or so found
   * none left: every further queue failed with SQLITE_CANTOPEN and connections were refused. Half
   * keeps even cells that all hold 9 under the limit.
   */
  openCellsFileDescriptorShare: 0.5,

  /**
   * celld's own: worker threads a host runs its cells on (ThreadedCellRegistry). Each is a V8
   * isolate of its own (about 10 MB before any cell) with a checkpoint thread; more threads than
   * cores buy nothing, and no machine celld targets has more cores than this.
   */
  cellThreadsMax: 64,

  /** Producer calls one cell holds between arrival and commit; the next is refused. */
  producerCallsInFlightMax: 256,
  /**
   * From when a message entered the queue, in every state: the default of a queue's
   * retentionSeconds, which Cloudflare lets go from 60 s to 14 days (message_retention_period).
   */
  retentionSeconds: 4 * 86_400,
  retentionSecondsMin: 60,
  retentionSecondsMax: 14 * 86_400,

  leaseMessagesMax: 100,
  visibilityTimeoutSecondsMin: 1,
  visibilityTimeoutSecondsDefault: 30,
  visibilityTimeoutSecondsMax: 12 * 3_600,
  leaseWaitSecondsMax: 20,
  /** The native API's max_deliveries. */
  maxDeliveriesMin: 1,
  maxDeliveriesMax: 100,
  maxDeliveriesDefault: 5,
  /** What a cell accepts: a Worker consumer's max_retries = 100 means 101 deliveries. */
  cellDeliveriesMax: maxRetriesMax + 1,
  /** One page of the dead-letter set. */
  deadPageMessagesMax: 1000,

  /** A Worker queue name: lowercase letters, digits and dashes (Cloudflare's rule). */
  queueNameCharsMax: 63,

  /** A content type label (v8, json, text, bytes, or a CloudEvents datacontenttype). */
  contentTypeCharsMax: 256,

  /** `[assets] run_worker_first` route rules of one Worker (Cloudflare's, as wrangler checks them). */
  assetsRouteRulesMax: 100,
  /** One such rule's characters, `!` included. */
  assetsRouteRuleCharsMax: 100,
} as const;

export type Limits = typeof limits;
