import { formatMs } from "../wire/timestamps.ts";
import { accountOf } from "./auth.ts";
import type { CloudflareContext, CloudflareRoute } from "./route.ts";

/**
 * What wrangler asks before it knows the account (`whoami`, or no CLOUDFLARE_ACCOUNT_ID): a token
 * sees exactly one account, its key's org, so wrangler picks it without asking.
 */
export const accountRoutes: CloudflareRoute[] = [
  { method: "GET", path: "/user/tokens/verify", scope: null, body: "none", handle: verifyToken },
  { method: "GET", path: "/user", scope: null, body: "none", handle: user },
  { method: "GET", path: "/memberships", scope: null, body: "none", handle: memberships },
  { method: "GET", path: "/accounts", scope: null, body: "none", handle: accounts },
  { method: "GET", path: "/accounts/{account}", scope: null, body: "none", handle: async (ctx) => ({ result: accountJson(ctx) }) },
];

async function verifyToken(ctx: CloudflareContext) {
  return {
    result: { id: ctx.key.id, status: "active", not_before: formatMs(ctx.key.createdAt) },
    messages: [{ code: 10000, message: "This API Token is valid and active" }],
  };
}

async function user(ctx: CloudflareContext) {
  // celld keys have no person behind them: the key's name (or id) stands in for the e-mail wrangler prints.
  return { result: { id: ctx.key.id, email: ctx.key.name === "" ? ctx.key.id : ctx.key.name } };
}

async function memberships(ctx: CloudflareContext) {
  const account = accountJson(ctx);
  return { result: [{ id: ctx.key.id, status: "accepted", account }], resultInfo: onePage(1) };
}

async function accounts(ctx: CloudflareContext) {
  return { result: [accountJson(ctx)], resultInfo: onePage(1) };
}

function accountJson(ctx: CloudflareContext): { id: string; name: string } {
  const id = accountOf(ctx.key);
  return { id, name: id };
}

function onePage(count: number) {
  return { page: 1, per_page: 20, count, total_count: count, total_pages: 1 };
}
