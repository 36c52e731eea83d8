import { CloudflareError } from "../cloudflare-api/cloudflare-errors.ts";

/**
 * What a deploy call refuses, with the Cloudflare error code wrangler reads (CLOUDFLARE-API-MAP.md
 * §1.3): 10007 makes `wrangler deploy` take a Worker for new and `secret put` create a draft one;
 * 10021 is an upload that fails validation, whose message wrangler prints as Cloudflare's. The
 * other codes are celld's own choice where no wrangler branch depends on one; each names the
 * field and the bound in its message.
 */
export const deployErrorKinds = {
  /** The Worker (script) is not on this host. */
  script_not_found: { code: 10007, status: 404 },
  /** The version or deployment named is not one of the Worker's. */
  version_not_found: { code: 10007, status: 404 },
  /** The upload is malformed or its Worker cannot start (syntax error, throws at load, bad binding). */
  invalid_upload: { code: 10021, status: 400 },
  /** A request field other than the upload is wrong (a secret's name, a deployment's split). */
  invalid_request: { code: 10026, status: 400 },
  /** The upload is over the script size bound. */
  too_large: { code: 10027, status: 413 },
  /** Another deploy of the same Worker is being applied; this one changed nothing. */
  conflict: { code: 10013, status: 409 },
} as const;

export type DeployErrorKind = keyof typeof deployErrorKinds;

/** A CloudflareError, so the /client/v4 mount answers it as it is: this status, this code. */
export class DeployError extends CloudflareError {
  readonly kind: DeployErrorKind;

  constructor(kind: DeployErrorKind, message: string, options: { cause?: unknown } = {}) {
    super(deployErrorKinds[kind].status, deployErrorKinds[kind].code, message, options);
    this.name = `DeployError [${kind}]`;
    this.kind = kind;
  }
}

export function isDeployError(error: unknown): error is DeployError {
  return error instanceof DeployError;
}
