import type { ApiKeyInfo, ApiKeyStore, ApiScope } from "./api-keys.ts";
import { ApiError } from "../wire/api-error.ts";

/** The key behind `Authorization: Bearer <key>`. A missing, unknown or revoked key is 401. */
export function authenticate(header: string | undefined, keys: ApiKeyStore): ApiKeyInfo {
  if (header === undefined || header === "") {
    throw new ApiError("unauthenticated", "no API key: send the header Authorization: Bearer <key>");
  }
  const match = /^Bearer +(\S+) *$/i.exec(header);
  const info = match === null ? undefined : keys.verify(match[1]!);
  if (info === undefined) {
    throw new ApiError("unauthenticated", "the API key is not valid: it is malformed, unknown or revoked");
  }
  return info;
}

/**
 * A key acts only inside the environment it is bound to, and only with its scopes. The
 * environment is checked before anything is looked up, so the answer says nothing about what
 * another environment holds.
 */
export function authorize(key: ApiKeyInfo, env: string, scope: ApiScope): void {
  if (key.env !== env) {
    throw new ApiError("permission_denied", `this API key is bound to ${key.env} and cannot act in ${env}`, {
      extra: { key_env: key.env },
    });
  }
  if (!key.scopes.includes(scope)) {
    throw new ApiError("permission_denied", `this API key lacks the scope ${scope}, which this call needs`, {
      extra: { required_scope: scope },
    });
  }
}
