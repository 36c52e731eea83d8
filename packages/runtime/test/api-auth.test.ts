import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  apiRoutes,
  apiScopes,
  createApiKey,
  formatApiKeyTable,
  listApiKeys,
  revokeApiKey,
  type ApiScope,
} from "../src/api/index.ts";
import { apiHarness, event, testEnv } from "./api-harness.ts";

const [, org, , project] = testEnv.split("/");

function concretePath(path: string, envName = testEnv): string {
  const [, o, , p, , e] = envName.split("/");
  return path
    .replace("{org}", o!)
    .replace("{project}", p!)
    .replace("{env}", e!)
    .replace("{queue}", "jobs")
    .replace("{subscription}", "sub");
}

describe("every route checks its scope", () => {
  it("the route table names a scope for every route", () => {
    expect(apiRoutes.length).toBeGreaterThanOrEqual(17);
    for (const route of apiRoutes) expect(apiScopes).toContain(route.scope);
  });

  for (const route of apiRoutes) {
    it(`${route.method} ${route.path} needs ${route.scope}`, async () => {
      const h = await apiHarness();
      await h.createQueue("jobs");
      const path = concretePath(route.path);
      const body = route.method === "POST" || route.method === "PATCH" ? {} : undefined;

      const others = apiScopes.filter((s) => s !== route.scope);
      const without = await h.call(route.method, path, { key: h.key(others), body });
      expect(without.status).toBe(403);
      expect(without.json.error).toMatchObject({ code: "permission_denied", required_scope: route.scope });

      const only = await h.call(route.method, path, { key: h.key([route.scope]), body });
      expect([401, 403]).not.toContain(only.status);

      const missing = await h.call(route.method, path, { key: null, body });
      expect(missing.status).toBe(401);
      expect(missing.headers["www-authenticate"]).toBe('Bearer realm="celld"');

      const wrong = await h.call(route.method, path, { key: `${h.defaultKey.slice(0, -4)}AAAA`, body });
      expect(wrong.status).toBe(401);

      const foreign = h.key(apiScopes, "orgs/other/projects/shop/envs/prod");
      const other = await h.call(route.method, path, { key: foreign, body });
      expect(other.status).toBe(403);
      expect(other.json.error.key_env).toBe("orgs/other/projects/shop/envs/prod");
    });
  }
});

describe("keys and environments", () => {
  it("a key of another environment learns nothing: the same answer whether a queue exists or not", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const foreign = h.key(apiScopes, `orgs/${org}/projects/${project}/envs/staging`);
    const existing = await h.call("GET", h.queuePath("jobs"), { key: foreign });
    const missing = await h.call("GET", h.queuePath("nope"), { key: foreign });
    expect(existing.status).toBe(403);
    expect(missing.json).toEqual(existing.json);
    // In its own environment the key sees only its own (empty) collection.
    const own = await h.call("GET", `/v1/orgs/${org}/projects/${project}/envs/staging/queues`, { key: foreign });
    expect(own.json.queues).toEqual([]);
  });

  it("a key cannot point its environment's queues at another environment", async () => {
    const h = await apiHarness();
    await h.createQueue("theirs", {}, `orgs/${org}/projects/${project}/envs/staging`);
    const res = await h.call("POST", `/v1/${testEnv}/queues`, {
      body: { name: "mine", dead_letter_queue: `orgs/${org}/projects/${project}/envs/staging/queues/theirs` },
    });
    expect(res.status).toBe(400);
    const sub = await h.call("POST", `/v1/${testEnv}/subscriptions`, {
      body: { name: "s", queue: `orgs/${org}/projects/${project}/envs/staging/queues/theirs` },
    });
    expect(sub.status).toBe(400);
    expect(sub.json.error.field).toBe("queue");
  });

  it("malformed Authorization headers are 401", async () => {
    const h = await apiHarness();
    for (const header of ["Basic abc", "Bearer", "Bearer not-a-key", `Token ${h.defaultKey}`]) {
      const res = await h.call("GET", `/v1/${testEnv}/queues`, { key: null, headers: { authorization: header } });
      expect(res.status).toBe(401);
    }
    const ok = await h.call("GET", `/v1/${testEnv}/queues`, { key: null, headers: { authorization: `bearer ${h.defaultKey}` } });
    expect(ok.status).toBe(200);
  });
});

describe("the key store", () => {
  it("stores only a hash: the key appears in no file under the data dir", async () => {
    const h = await apiHarness();
    const { key, info } = h.keys.create({ env: testEnv, scopes: ["events:read"], name: "ci" });
    expect(key).toMatch(/^ck_[0-9a-z]{16}_[A-Za-z0-9_-]{43}$/);
    expect(key.startsWith(`${info.id}_`)).toBe(true);
    const secret = key.slice(info.id.length + 1);
    const dir = join(h.dataDir, "api");
    for (const file of readdirSync(dir)) {
      const bytes = readFileSync(join(dir, file));
      expect(bytes.includes(secret)).toBe(false);
    }
    expect(h.keys.verify(key)).toMatchObject({ id: info.id, env: testEnv, scopes: ["events:read"], name: "ci" });
  });

  it("verify refuses a wrong secret for a real id, an unknown id, and a revoked key", async () => {
    const h = await apiHarness();
    const { key, info } = h.keys.create({ env: testEnv, scopes: ["events:read"] });
    const flipped = key.slice(0, -1) + (key.endsWith("A") ? "B" : "A");
    expect(h.keys.verify(flipped)).toBeUndefined();
    expect(h.keys.verify(`ck_${"0".repeat(16)}_${key.slice(-43)}`)).toBeUndefined();
    expect(h.keys.verify("")).toBeUndefined();
    expect(h.keys.revoke(info.id)?.revokedAt).toBe(h.clock.now());
    expect(h.keys.verify(key)).toBeUndefined();
    expect(h.keys.revoke("ck_nosuchkey")).toBeUndefined();
  });

  it("keys created, listed and revoked by the CLI functions act on a running server at once", async () => {
    const h = await apiHarness();
    const { key, info } = createApiKey(h.dataDir, { env: testEnv, scopes: ["events:write", "events:read"], name: "worker" });
    expect((await h.call("GET", `/v1/${testEnv}/queues`, { key })).status).toBe(200);
    expect(listApiKeys(h.dataDir).map((k) => k.id)).toContain(info.id);
    expect(revokeApiKey(h.dataDir, info.id)?.revokedAt).not.toBeNull();
    expect((await h.call("GET", `/v1/${testEnv}/queues`, { key })).status).toBe(401);
    expect(listApiKeys(h.dataDir).map((k) => k.id)).not.toContain(info.id);
    expect(listApiKeys(h.dataDir, { includeRevoked: true }).map((k) => k.id)).toContain(info.id);
  });

  it("refuses a key for a malformed environment, with no scope, or an unknown scope", async () => {
    const h = await apiHarness();
    expect(() => h.keys.create({ env: "acme/shop/prod", scopes: ["events:read"] })).toThrow(/env must be an environment name/);
    expect(() => h.keys.create({ env: testEnv, scopes: [] })).toThrow("scopes must name one or more of events:publish, events:write, events:read, metrics:read");
    expect(() => h.keys.create({ env: testEnv, scopes: ["events:admin"] })).toThrow('unknown scope "events:admin"');
  });

  it("formats the key list for the CLI without any secret", () => {
    const table = formatApiKeyTable([
      { id: "ck_0123456789abcdef", name: "ci", env: testEnv, scopes: ["events:publish", "events:read"], createdAt: Date.UTC(2026, 0, 1), revokedAt: null },
      { id: "ck_fedcba9876543210", name: "", env: testEnv, scopes: ["events:write"], createdAt: Date.UTC(2026, 0, 2), revokedAt: Date.UTC(2026, 0, 3) },
    ]);
    expect(table).toBe(
      [
        "ID                   NAME  ENV                                SCOPES                      CREATED                   REVOKED",
        "ck_0123456789abcdef  ci    orgs/acme/projects/shop/envs/prod  events:publish,events:read  2026-01-01T00:00:00.000Z  -",
        "ck_fedcba9876543210  -     orgs/acme/projects/shop/envs/prod  events:write                2026-01-02T00:00:00.000Z  2026-01-03T00:00:00.000Z",
      ].join("\n"),
    );
  });

  it("a send with a publish-only key works end to end; that key cannot lease", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const publisher = h.key(["events:publish"] satisfies ApiScope[]);
    const sent = await h.call("POST", `${h.queuePath("jobs")}:send`, { key: publisher, body: { events: [event("a")] } });
    expect(sent.status).toBe(200);
    expect((await h.call("POST", `${h.queuePath("jobs")}:lease`, { key: publisher, body: {} })).status).toBe(403);
  });
});
