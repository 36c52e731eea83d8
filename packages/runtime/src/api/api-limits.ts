import { limits } from "@celld/queue-cell/limits";

/**
 * A send or publish body. The events of one call are at most `batchBytesMax` once encoded;
 * base64 (4/3) and JSON escaping need room above that, and four times covers both.
 */
const sendBodyBytesMax = limits.batchBytesMax * 4;

/**
 * Bounds that exist only at the HTTP edge. Every queue bound (message bytes, batch size, lease
 * size, visibility, wait, delays, deliveries) comes from `limits` in @celld/queue-cell; these are
 * the ones a cell never sees: request bodies, JSON shape, names, pages, keys, subscriptions.
 * They stay here, at the edge that enforces them, because the cell package knows nothing of HTTP;
 * where one matches a queue bound it is derived from `limits`, not repeated.
 */
export const apiLimits = {
  sendBodyBytesMax,
  /** Every other body: a hundred lease references or a queue's settings fit many times over. */
  controlBodyBytesMax: 64 * 1024,
  /** Nesting of any JSON body, event data included. */
  jsonDepthMax: 32,
  /** Items of any one JSON array, event data included; the API's own arrays have tighter bounds. */
  jsonArrayItemsMax: 10_000,
  /**
   * Members of any one JSON object, event data included. The API's own objects hold a few (an event
   * at most its 32 extensions and a dozen attributes), but data may be a large object; as many as
   * an array may hold is room for any real one. Without it, one event of 60,000 extension names
   * took 0.4 to 0.8 s of the event loop before the extension bound refused it.
   */
  jsonObjectMembersMax: 10_000,

  /** One segment of a resource name (org, project, env, queue, subscription). */
  nameSegmentCharsMax: limits.queueNameCharsMax,
  /** id, source, type, subject, dataschema and string extension values of a CloudEvent. */
  eventAttributeCharsMax: 1024,
  /**
   * CloudEvents 1.0 asks that a name SHOULD NOT exceed 20 characters, and SDKs send longer ones
   * (the JavaScript SDK never checks, Go's no longer does), so a name is bounded only against
   * abuse: 32 names of 128 characters are 4 KiB, little beside an event's 128,000 bytes.
   */
  eventExtensionNameCharsMax: 128,
  eventExtensionsMax: 32,

  /** Default lease size when a lease names none: the batch a Worker consumer gets by default. */
  leaseMessagesDefault: limits.maxBatchSizeDefault,
  pageSizeDefault: 50,
  pageSizeMax: 100,
  /** Dead letters carry their bodies, so their pages are smaller. */
  deadLetterPageSizeDefault: 10,
  deadLetterPageSizeMax: limits.leaseMessagesMax,
  pageTokenCharsMax: 200,

  /**
   * Cloudflare's bound on queues per account, an environment being the nearest thing to one here.
   * Each queue is a file and, while in use, an open cell: without a bound one key could make them
   * until the host ran out of file descriptors or disk.
   */
  queuesPerEnvMax: 10_000,
  subscriptionsPerEnvMax: 100,
  /** Patterns in one subscription's `types` or `sources`. */
  subscriptionPatternsMax: 20,

  apiKeyNameCharsMax: 100,

  /** What a 429, or a 503 for a queue that is closing, tells the client to wait before retrying. */
  retryAfterSeconds: 1,
  /**
   * What a 503 for a storage failure the queue gets over by itself (a full disk) tells the client
   * to wait. Space is freed by a person or a cleanup job, not within a second; a retry every ten
   * seconds per client costs a full disk little and finds it usable soon after.
   */
  storageRetryAfterSeconds: 10,

  /**
   * All of a request's headers together, request line included: Node's default, named here so the
   * docs and the 431 answer state it. A binary-mode CloudEvent's attributes share it, so an event
   * with many long attributes has to go in structured mode, whose body bound is larger.
   */
  headerBytesMax: 16_384,
  /** A client must send its request headers within this, or gets 408 and a closed connection. */
  headersTimeoutMs: 10_000,
  /** ...and its whole request, body included. Long polls are unaffected: this ends at the body. */
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  /** How often Node checks the two timeouts above. */
  timeoutCheckIntervalMs: 1_000,
  /**
   * A body refused unread (too large, a bad key) is still read and dropped, up to this many bytes
   * and for at most this long, so that a client that writes its whole body before reading gets
   * the answer; past either the connection is closed under it. Eight times the largest body
   * covers the oversize bodies clients send by mistake (a 4.4 MB send).
   */
  refusedBodyDrainBytesMax: sendBodyBytesMax * 8,
  refusedBodyDrainMs: 10_000,
  /**
   * A connection on which nothing moves for this long is closed: above all one whose client has
   * stopped reading its answer, which Node would otherwise hold in memory for as long as the
   * connection lasts (a lease or dead-letter page of 100 large messages is about 16 MB). It is
   * longer than a long poll's wait plus room for a slow commit, the only silence a request has.
   */
  socketIdleTimeoutMs: limits.leaseWaitSecondsMax * 1000 + 40_000,
  /**
   * Bytes of answers written that their clients have not read yet, server-wide. Until the idle
   * timeout above closes it, each connection whose client does not read holds its answer, and a
   * lease or dead-letter page of 100 large messages is about 16 MB: a few hundred such clients
   * held gigabytes. A client that reads takes its answer within milliseconds, so this much (sixteen
   * of the largest answers unread at once) is never reached by clients that read, and is memory a
   * host running celld can spare. Past it, leases and dead-letter pages are refused (503).
   */
  answerBytesPendingMax: 256 * 1024 * 1024,
  /**
   * A connection that sends no byte this long after it opens is closed (front/connection-guard.ts):
   * headersTimeoutMs only starts at a request's first byte, so without it an idle connection cost
   * nothing to hold, and 20,000 of them took the descriptors the queues needed.
   */
  silentConnectionMs: 10_000,
  /**
   * Client connections open at once when the host does not size it from its descriptor budget
   * (front/descriptor-budget.ts), as `celld dev` does; a test or an embedder starting the API alone.
   */
  connectionsMaxDefault: 1_000,
} as const;

export type ApiLimits = typeof apiLimits;
