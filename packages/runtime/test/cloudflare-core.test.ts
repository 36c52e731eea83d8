import { describe, expect, it } from "vitest";
import { apiHarness, testEnv } from "./api-harness.ts";
import { wranglerAgainst } from "./wrangler-cli.ts";

// The /client/v4 core: envelope, token, account, routes. The queue routes have their own tests.
describe("Cloudflare REST core", () => {
  it("verifies a celld key as a Cloudflare token, in Cloudflare's envelope", async () => {
    const api = await apiHarness();
    const res = await api.call("GET", "/client/v4/user/tokens/verify");
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ success: true, errors: [], result: { status: "active" } });
  });

  it("refuses a missing or wrong token with the authentication error (10000, 401)", async () => {
    const api = await apiHarness();
    for (const key of [null, "ck_nope", `${api.defaultKey}x`]) {
      const res = await api.call("GET", "/client/v4/user/tokens/verify", { key });
      expect(res.status).toBe(401);
      expect(res.json).toMatchObject({ success: false, result: null, errors: [{ code: 10000 }] });
      expect(res.json.errors[0].message).toMatch(/^Authentication error/);
    }
    // Before the route is looked up: an unknown path tells a stranger nothing either.
    const unknown = await api.call("GET", "/client/v4/accounts/acme/nothing", { key: null });
    expect(unknown.status).toBe(401);
  });

  it("revoking the key ends the token", async () => {
    const api = await apiHarness();
    const created = api.keys.create({ env: testEnv, scopes: ["events:read"] });
    expect((await api.call("GET", "/client/v4/user/tokens/verify", { key: created.key })).status).toBe(200);
    api.keys.revoke(created.info.id);
    expect((await api.call("GET", "/client/v4/user/tokens/verify", { key: created.key })).status).toBe(401);
  });

  it("answers the account look-ups with the key's org, and refuses another account (9109, 403)", async () => {
    const api = await apiHarness();
    const accounts = await api.call("GET", "/client/v4/accounts?page=1");
    expect(accounts.json.result).toEqual([{ id: "acme", name: "acme" }]);
    const memberships = await api.call("GET", "/client/v4/memberships?page=1");
    expect(memberships.json.result[0].account).toEqual({ id: "acme", name: "acme" });
    expect((await api.call("GET", "/client/v4/accounts/acme")).json.result.id).toBe("acme");
    const other = await api.call("GET", "/client/v4/accounts/globex");
    expect(other.status).toBe(403);
    expect(other.json.errors[0].code).toBe(9109);
  });

  it("answers an unknown route and a wrong method in the envelope", async () => {
    const api = await apiHarness();
    const none = await api.call("GET", "/client/v4/accounts/acme/nothing");
    expect(none.status).toBe(404);
    expect(none.json).toMatchObject({ success: false, errors: [{ code: 7003 }] });
    const method = await api.call("DELETE", "/client/v4/user/tokens/verify");
    expect(method.status).toBe(405);
    expect(method.json.errors[0].code).toBe(7001);
    // The native API is untouched beside it.
    expect((await api.call("GET", `/v1/${testEnv}/queues`)).status).toBe(200);
  });

  it("real wrangler: whoami finds the one account without CLOUDFLARE_ACCOUNT_ID", async () => {
    const api = await apiHarness();
    const wrangler = wranglerAgainst(api.server.url, api.defaultKey, undefined);
    const out = await wrangler(["whoami"]);
    expect(out.stderr).not.toMatch(/error/i);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain("acme");
  });
});
