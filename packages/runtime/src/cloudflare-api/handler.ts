import type { IncomingMessage, ServerResponse } from "node:http";
import { apiLimits } from "../api/api-limits.ts";
import { checkContentEncoding, checkDeclaredLength, delivered, expectsContinue, jsonAnswer, readBody, writeAnswer, writeErrorAndClose } from "../api/http-io.ts";
import { parseJsonBody } from "../api/json-body.ts";
import { Router, type ApiDeps } from "../api/router.ts";
import { accountOf, authenticateToken, checkAccount, checkScope } from "./auth.ts";
import { CloudflareError, CloudflareNumberError, cloudflareCodes, toCloudflareError, type CloudflareCodeMap } from "./cloudflare-errors.ts";
import { successEnvelope } from "./envelope.ts";
import { cloudflareLimits } from "./limits.ts";
import type { CloudflareReply, CloudflareRoute } from "./route.ts";
import type { CloudflareServices } from "./services.ts";

export const cloudflarePrefix = "/client/v4";

export interface CloudflareMountOptions {
  routes: readonly CloudflareRoute[];
  deps: ApiDeps;
  services: CloudflareServices;
  stopping: AbortSignal;
  onInternalError: (error: unknown) => void;
  refusedBodyDrainMs: number;
}

/**
 * Cloudflare's REST API subset on the API port, under /client/v4: token -> route -> account ->
 * scope -> body -> handler -> envelope. The same key store and cells as the native API (/v1);
 * only the shapes differ.
 */
export class CloudflareMount {
  private readonly router: Router<CloudflareRoute>;

  constructor(private readonly options: CloudflareMountOptions) {
    this.router = new Router(options.routes.map((route) => ({ ...route, path: `${cloudflarePrefix}${route.path}` })));
  }

  static serves(path: string): boolean {
    return path === cloudflarePrefix || path.startsWith(`${cloudflarePrefix}/`);
  }

  routes(): ReadonlyArray<Pick<CloudflareRoute, "method" | "path" | "scope">> {
    return this.router.list();
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const gone = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) gone.abort();
    });
    let bodyRead = false;
    let codes: CloudflareCodeMap | undefined;
    // The text of numbers the body's parse could not hold exactly, for a refusal to quote.
    let inexactNumbers: ReadonlyMap<string, string> | undefined;
    try {
      const url = new URL(req.url ?? "/", "http://localhost");
      const match = this.router.match(req.method ?? "", url.pathname);
      // The token first: without one, nobody learns which routes exist.
      const own = match.kind === "found" ? match.route.authenticate : undefined;
      const key = own !== undefined ? own(req.headers.authorization, this.options.services) : authenticateToken(req.headers.authorization, this.options.deps.keys);
      if (match.kind === "none") throw new CloudflareError(404, cloudflareCodes.noRoute, `No route for the URI: ${req.method} ${url.pathname}`);
      if (match.kind === "method") {
        throw new CloudflareError(405, cloudflareCodes.methodNotAllowed, `${url.pathname} takes ${match.allowed.join(", ")}, not ${req.method}`);
      }
      const { route, params } = match;
      codes = route.codes;
      if (params["account"] !== undefined) checkAccount(key, params["account"]);
      checkScope(key, route.scope);
      const { body, bytes, numbers } = await this.readRequestBody(req, res, route);
      bodyRead = true;
      inexactNumbers = numbers;
      const reply = await route.handle({
        params,
        query: url.searchParams,
        body,
        bytes,
        key,
        account: accountOf(key),
        env: key.env,
        deps: this.options.deps,
        services: this.options.services,
        req,
        res,
        clientGone: gone.signal,
        stopping: this.options.stopping,
      });
      await this.answer(res, reply, gone.signal);
    } catch (thrown) {
      this.refuse(req, res, quotedAsSent(toCloudflareError(thrown, codes), inexactNumbers), thrown, bodyRead);
    }
  }

  private async readRequestBody(
    req: IncomingMessage,
    res: ServerResponse,
    route: CloudflareRoute,
  ): Promise<{ body: unknown; bytes: Uint8Array | undefined; numbers?: ReadonlyMap<string, string> }> {
    if (route.body === "none") return { body: undefined, bytes: undefined };
    const cap = route.bodyBytesMax ?? cloudflareLimits.bodyBytesDefault;
    checkContentEncoding(req);
    if (expectsContinue(req)) {
      checkDeclaredLength(req, cap);
      res.writeContinue();
    }
    const bytes = await readBody(req, cap);
    if (route.body === "raw") return { body: undefined, bytes };
    // wrangler sends JSON bodies as text/plain: the type is not looked at.
    const parsed = parseJsonBody(bytes, { uniqueMembers: true });
    return { body: parsed.value, bytes, numbers: parsed.inexactNumbers };
  }

  private async answer(res: ServerResponse, reply: CloudflareReply, gone: AbortSignal): Promise<void> {
    if (gone.aborted) {
      await reply.afterWrite?.(false);
      return;
    }
    if (reply.raw !== undefined) {
      writeAnswer(res, reply.status ?? 200, { type: reply.raw.type, body: Buffer.from(reply.raw.body) }, reply.headers);
    } else {
      const envelope = successEnvelope(reply.result, reply.resultInfo, reply.messages);
      writeAnswer(res, reply.status ?? 200, jsonAnswer(JSON.stringify(envelope)), reply.headers);
    }
    if (reply.afterWrite !== undefined) await reply.afterWrite(await delivered(res));
  }

  private refuse(req: IncomingMessage, res: ServerResponse, error: CloudflareError, thrown: unknown, bodyRead: boolean): void {
    if (error.status === 500 && !(thrown instanceof CloudflareError)) this.options.onInternalError(thrown);
    if (res.headersSent || res.destroyed) return;
    const headers: Record<string, string> = {};
    if (error.status === 401) headers["www-authenticate"] = 'Bearer realm="celld"';
    if (error.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.retryAfterSeconds);
    // The SDK retries 408, 409, 429 and 5xx unless told not to: only a retry that can work is asked for.
    headers["x-should-retry"] = error.retryAfterSeconds !== undefined ? "true" : "false";
    const body = Buffer.from(JSON.stringify(error.toJSON()));
    if (hasBody(req) && !bodyRead) {
      writeErrorAndClose(req, res, error, headers, { bytesMax: apiLimits.refusedBodyDrainBytesMax, ms: this.options.refusedBodyDrainMs });
    } else {
      writeAnswer(res, error.status, { type: "application/json; charset=utf-8", body }, headers);
    }
  }
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined;
}

/** A refused number past 2^53 - 1 quoted as its sender wrote it, when the body had it. */
function quotedAsSent(error: CloudflareError, inexactNumbers: ReadonlyMap<string, string> | undefined): CloudflareError {
  if (!(error instanceof CloudflareNumberError)) return error;
  const literal = inexactNumbers?.get(error.field);
  return literal === undefined ? error : error.quoting(literal);
}
