import type { IncomingMessage, ServerResponse } from "node:http";
import type { MetricsEndpoint } from "../metrics/metrics-endpoint.ts";
import { wantsOpenMetrics } from "../metrics/exposition.ts";
import type { ApiKeyStore } from "./api-keys.ts";
import { authenticate } from "./auth.ts";
import { ApiError } from "../wire/api-error.ts";
import { writeAnswer } from "./http-io.ts";

export const metricsPath = "/metrics";

/**
 * `GET /metrics`, outside /v1: a key with `metrics:read` sees the host's series and its own
 * environment's queues; with `--metrics-public`, no key is asked for and every queue is shown.
 */
export async function answerMetrics(req: IncomingMessage, res: ServerResponse, endpoint: MetricsEndpoint | undefined, keys: ApiKeyStore): Promise<void> {
  if (endpoint === undefined) throw new ApiError("not_found", `no route for ${req.method} ${metricsPath}: this server keeps no metrics`);
  if (req.method !== "GET") {
    throw new ApiError("method_not_allowed", `${metricsPath} takes GET, not ${req.method}`, { extra: { allowed_methods: ["GET"] } });
  }
  let environment: string | undefined;
  if (!endpoint.public) {
    const key = authenticate(req.headers.authorization, keys);
    if (!key.scopes.includes("metrics:read")) {
      throw new ApiError("permission_denied", "this API key lacks the scope metrics:read, which this call needs", {
        extra: { required_scope: "metrics:read" },
      });
    }
    environment = key.env;
  }
  const { contentType, body } = await endpoint.scrape(wantsOpenMetrics(req.headers.accept), environment);
  writeAnswer(res, 200, { type: contentType, body: Buffer.from(body) });
}
