// Cloudflare's REST API subset on the API port (/client/v4): what startApiServer mounts.
export { CloudflareMount, cloudflarePrefix, type CloudflareMountOptions } from "./handler.ts";
export { cloudflareRoutes } from "./routes.ts";
export { CloudflareError, cloudflareCodes, toCloudflareError, type CloudflareCodeMap } from "./cloudflare-errors.ts";
export { successEnvelope, failureEnvelope, type ResultInfo, type CloudflareMessage } from "./envelope.ts";
export type { CloudflareRoute, CloudflareContext, CloudflareReply } from "./route.ts";
export type { CloudflareServices } from "./services.ts";
