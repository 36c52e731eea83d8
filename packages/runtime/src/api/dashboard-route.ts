import type { IncomingMessage, ServerResponse } from "node:http";
import { dashboardCsp, dashboardFiles, dashboardPrefix } from "../dashboard/dashboard-files.ts";
import type { ApiKeyStore } from "./api-keys.ts";
import { authenticate } from "./auth.ts";
import { ApiError } from "../wire/api-error.ts";
import { writeAnswer, writeJson } from "./http-io.ts";

/** Paths outside the routed /v1 API that the server answers itself. */
export function isDashboardPath(path: string): boolean {
  return path === "/" || path === "/dashboard" || path.startsWith(dashboardPrefix);
}

export const keyPath = "/v1/key";

/**
 * The web dashboard's files, read by anyone: they hold no data. Everything the page shows it asks
 * of the API with the key it was given, through the same routes and scope checks as any client.
 */
export function answerDashboard(req: IncomingMessage, res: ServerResponse, path: string): void {
  if (req.method !== "GET" && req.method !== "HEAD") {
    throw new ApiError("method_not_allowed", `${path} takes GET, not ${req.method}`, { extra: { allowed_methods: ["GET"] } });
  }
  if (path === "/" || path === "/dashboard") {
    res.writeHead(302, { location: dashboardPrefix, "content-length": "0" });
    res.end();
    return;
  }
  const file = dashboardFiles().get(path.slice(dashboardPrefix.length));
  if (file === undefined) throw new ApiError("not_found", `no dashboard file ${path}`);
  writeAnswer(res, 200, { type: file.type, body: file.body }, {
    "content-security-policy": dashboardCsp,
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
  });
}

/** `GET /v1/key`: the key's own id, name, environment and scopes; what the dashboard signs in with. */
export function answerKey(req: IncomingMessage, res: ServerResponse, keys: ApiKeyStore): void {
  if (req.method !== "GET") {
    throw new ApiError("method_not_allowed", `${keyPath} takes GET, not ${req.method}`, { extra: { allowed_methods: ["GET"] } });
  }
  const key = authenticate(req.headers.authorization, keys);
  writeJson(res, 200, { id: key.id, name: key.name, env: key.env, scopes: key.scopes });
}
