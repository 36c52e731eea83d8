// The native queues HTTP API: what the host's CLI starts, and what tests and the client import.
export { startApiServer, apiRoutes, type ApiServer, type ApiServerOptions, type ApiServerTimeouts, type AnsweredRequest } from "./server.ts";
export {
  ApiKeyStore,
  apiScopes,
  createApiKey,
  listApiKeys,
  revokeApiKey,
  formatApiKeyTable,
  type ApiScope,
  type ApiKeyInfo,
  type CreatedApiKey,
  type CreateApiKeyInput,
} from "./api-keys.ts";
export { ApiError, apiErrorStatus, type ApiErrorCode } from "../wire/api-error.ts";
export { apiLimits, type ApiLimits } from "./api-limits.ts";
export { defaultWorkerEnv, type WorkerQueueOptions } from "./queue-directory.ts";
/** `orgs/{org}/projects/{project}/envs/{env}`, for `celld keys create --org --project --env`. */
export { envName, checkEnvName, checkSegment } from "./names.ts";
export { workerMessageEventType } from "./cloudevents.ts";
