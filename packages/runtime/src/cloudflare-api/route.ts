import type { IncomingMessage, ServerResponse } from "node:http";
import type { ApiKeyInfo, ApiScope } from "../api/api-keys.ts";
import type { ApiDeps } from "../api/router.ts";
import type { CloudflareCodeMap } from "./cloudflare-errors.ts";
import type { CloudflareMessage, ResultInfo } from "./envelope.ts";
import type { CloudflareServices } from "./services.ts";

/** One route under /client/v4, declared with the scope it needs (see README.md). */
export interface CloudflareRoute {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Relative to /client/v4: `/accounts/{account}/queues/{queue}`. `{account}` is checked against the token. */
  path: string;
  /** The celld scope the token needs; null: any live token (token verification, account look-ups). */
  scope: ApiScope | null;
  /**
   * `json`: the body parsed as JSON whatever its Content-Type (wrangler sends JSON as text/plain),
   * `{}` when empty; `raw`: the bytes, for the route to read (multipart uploads); `none`: unread.
   */
  body: "none" | "json" | "raw";
  /** The body's cap in bytes; default cloudflareLimits.bodyBytesDefault. */
  bodyBytesMax?: number;
  /** Cloudflare codes for this route's failures, by native error code (not_found -> 10104 for a queue). */
  codes?: CloudflareCodeMap;
  /** Another credential than an API token (the assets upload's session token): the key it acts as. */
  authenticate?: (authorization: string | undefined, services: CloudflareServices) => ApiKeyInfo;
  handle: (ctx: CloudflareContext) => Promise<CloudflareReply>;
}

export interface CloudflareContext {
  /** Path parameters, percent-decoded; `account` already checked. */
  params: Record<string, string>;
  query: URLSearchParams;
  /** The parsed JSON body (`json` routes). */
  body: unknown;
  /** The body's bytes (`raw` routes). */
  bytes: Uint8Array | undefined;
  key: ApiKeyInfo;
  /** The account id: the key's org. */
  account: string;
  /** The key's environment, `orgs/{org}/projects/{project}/envs/{env}`: where its resources live. */
  env: string;
  deps: ApiDeps;
  services: CloudflareServices;
  req: IncomingMessage;
  res: ServerResponse;
  /** Aborts when the client goes away before the answer is written. */
  clientGone: AbortSignal;
  /** Aborts when the server is shutting down. */
  stopping: AbortSignal;
}

export interface CloudflareReply {
  status?: number;
  result: unknown;
  resultInfo?: ResultInfo;
  /** The envelope's `messages`: notes that are not errors (celld reports stale leases here). */
  messages?: CloudflareMessage[];
  headers?: Record<string, string>;
  /** Answered as is instead of the envelope: a script's content (multipart), as Cloudflare sends it. */
  raw?: { type: string; body: Uint8Array };
  /** Told whether the answer reached the connection: a pull hands back what it could not deliver. */
  afterWrite?: (delivered: boolean) => Promise<void>;
}
