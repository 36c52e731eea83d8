import type { ApiKeyInfo, ApiKeyStore, ApiScope } from "../api/api-keys.ts";
import { CloudflareError, cloudflareCodes } from "./cloudflare-errors.ts";

/**
 * A Cloudflare API token is a celld API key, sent as wrangler and the SDK send tokens
 * (`Authorization: Bearer <key>`). The global-key headers (X-Auth-Key, X-Auth-Email) have no
 * celld counterpart and are refused like a wrong token.
 */
export function authenticateToken(header: string | undefined, keys: ApiKeyStore): ApiKeyInfo {
  const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
  const info = match === null ? undefined : keys.verify(match[1]!);
  if (info === undefined) {
    const why =
      header === undefined || header === ""
        ? "no token: send Authorization: Bearer <celld API key> (CLOUDFLARE_API_TOKEN)"
        : "the token is not a live celld API key: it is malformed, unknown or revoked";
    throw new CloudflareError(401, cloudflareCodes.authentication, `Authentication error: ${why}`);
  }
  return info;
}

/** The Cloudflare account id of a key: its org (`orgs/{org}/projects/...`). */
export function accountOf(key: ApiKeyInfo): string {
  return key.env.split("/")[1]!;
}

/**
 * A key acts only for its own account. Checked before anything is looked up, so the answer says
 * nothing about another account.
 */
export function checkAccount(key: ApiKeyInfo, account: string): void {
  const own = accountOf(key);
  if (account !== own) {
    throw new CloudflareError(
      403,
      cloudflareCodes.permission,
      `Unauthorized to access requested resource: this token belongs to account ${own}, not ${account}`,
    );
  }
}

/** `null`: any live token may call the route (token verification, account look-ups). */
export function checkScope(key: ApiKeyInfo, scope: ApiScope | null): void {
  if (scope === null || key.scopes.includes(scope)) return;
  throw new CloudflareError(
    403,
    cloudflareCodes.permission,
    `Unauthorized to access requested resource: this token lacks the scope ${scope}, which this call needs`,
  );
}
