import { cloudflareConsumerRoutes } from "./queues/routes-consumers.ts";
import { cloudflareMessageRoutes } from "./queues/routes-messages.ts";
import { cloudflarePurgeRoutes } from "./queues/routes-purge.ts";
import { cloudflareQueueRoutes } from "./queues/routes-queues.ts";
import { accountRoutes } from "./routes-accounts.ts";
import { workerTriggerRoutes } from "./routes-workers-triggers.ts";
import { workerRoutes } from "./routes-workers.ts";
import { zoneAndR2Routes } from "./routes-zones-r2.ts";
import type { CloudflareRoute } from "./route.ts";

/**
 * Every route under /client/v4. A new surface adds its file's array here (and nothing else): the
 * mount authenticates, checks the account and the scope, reads the body and writes the envelope.
 */
export const cloudflareRoutes: readonly CloudflareRoute[] = [
  ...accountRoutes,
  ...cloudflareQueueRoutes,
  ...cloudflareConsumerRoutes,
  ...cloudflareMessageRoutes,
  ...cloudflarePurgeRoutes,
  ...workerRoutes,
  ...workerTriggerRoutes,
  ...zoneAndR2Routes,
];
