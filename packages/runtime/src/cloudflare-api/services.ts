import type { DeployService } from "../deploy/deploy-service.ts";
import type { R2BucketList } from "../deploy/r2-bucket-list.ts";
import type { TailSessions } from "./tail-sessions.ts";

/**
 * What the host lends the Cloudflare routes beyond the native API's deps (ApiDeps): each member is
 * optional, so a server started without a host (tests of one route file) runs the routes that
 * need none. A route file that needs a host service adds its member here.
 */
export interface CloudflareServices {
  /** `celld serve`'s deployed Workers: scripts, versions, deployments, secrets, schedules. */
  workers?: DeployService;
  /**
   * The environment whose queues `celld serve`'s Workers bind (`--workers-env`): only its tokens
   * may deploy, so that a Worker's queues are the ones its deployer sees.
   */
  workersEnv?: string;
  /** `celld serve`'s R2 buckets, which wrangler checks before deploying a Worker that binds one. */
  r2Buckets?: R2BucketList;
  /** `wrangler tail` sessions; absent: `POST .../tails` is refused. */
  tails?: TailSessions;
  /** The Workers config's side of its queues (queues/workers-queues.ts); absent: no config declares any. */
  workersQueues?: WorkersQueueInfo;
}

/** A consumer the Workers config declares: the config owns it, the API only shows it. */
export interface ConfigConsumer {
  type: "worker" | "http_pull";
  /** The consuming Worker (`worker` consumers only). */
  script: string | undefined;
  /** In Cloudflare's names: batch_size, max_retries, max_wait_time_ms, max_concurrency, retry_delay, visibility_timeout_ms. */
  settings: Record<string, number>;
  /** The short name of its dead-letter queue. */
  deadLetterQueue: string | undefined;
}

/** By the short queue name of a queue in the Workers environment. */
export interface WorkersQueueInfo {
  producers(queue: string): string[];
  consumers(queue: string): ConfigConsumer[];
}
