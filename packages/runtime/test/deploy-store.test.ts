import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ManualClock } from "@celld/queue-cell";
import { DeployStore, type NewVersion } from "../src/deploy/deploy-store.ts";
import { DeployError } from "../src/deploy/deploy-errors.ts";

let dataDir: string;
let clock: ManualClock;
let store: DeployStore;

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), "celld-deploy-store-"));
  clock = new ManualClock(Date.parse("2026-12-01T00:00:00Z"));
  store = new DeployStore(dataDir, { clock });
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

function upload(text: string, extra: Partial<NewVersion> = {}): NewVersion {
  return {
    modules: [
      { name: "index.js", contentType: "application/javascript+module", bytes: Buffer.from(text) },
      { name: "./abc-hello.txt", contentType: "text/plain", bytes: Buffer.from("hello\n") },
    ],
    mainModule: "index.js",
    annotations: { "workers/triggered_by": "upload" },
    compatibilityDate: "2025-01-01",
    compatibilityFlags: [],
    bindings: [{ type: "plain_text", name: "GREETING", text: "hi" }],
    durableObjectClasses: [],
    migrationTag: undefined,
    ...extra,
  };
}

describe("DeployStore versions", () => {
  it("keeps each upload whole, numbered, newest first, its modules byte for byte", () => {
    const first = store.addVersion("hello", upload("export default 1"));
    clock.advance(1_000);
    const second = store.addVersion("hello", upload("export default 2"));
    expect(first.number).toBe(1);
    expect(second.number).toBe(2);
    expect(first.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(store.versions("hello").map((v) => v.id)).toEqual([second.id, first.id]);
    expect(store.version("hello", first.id)).toEqual(first);
    expect(first.modules.map((m) => m.name)).toEqual(["index.js", "abc-hello.txt"]);
    expect(readFileSync(join(store.modulesDir("hello", first.id), "index.js"), "utf8")).toBe("export default 1");
    expect(readFileSync(join(store.modulesDir("hello", second.id), "abc-hello.txt"), "utf8")).toBe("hello\n");
    expect(first.createdOn).toBe("2026-12-01T00:00:00.000Z");
    expect(store.has("hello")).toBe(true);
    expect(store.has("other")).toBe(false);
  });

  it("lists no version a crash left half-written", () => {
    const kept = store.addVersion("hello", upload("export default 1"));
    const half = join(dataDir, "deploy", "scripts", "hello", "versions", ".tmp-11111111-2222-3333-4444-555555555555");
    mkdirSync(join(half, "modules"), { recursive: true });
    writeFileSync(join(half, "modules", "index.js"), "export def");
    expect(store.versions("hello").map((v) => v.id)).toEqual([kept.id]);
  });

  it("refuses a module name that would leave its directory, and a bad Worker name", () => {
    for (const name of ["../x.js", "/etc/passwd", "a//b.js", "a/./b.js", "a\\b.js", ""]) {
      expect(() => store.addVersion("hello", upload("x", { mainModule: name })), name).toThrow(DeployError);
    }
    expect(() => store.addVersion("../up", upload("x"))).toThrow(/Worker name "..\/up" is not valid/);
    expect(() => store.version("hello", "../../x")).toThrow(/is not a version id/);
    expect(readdirSync(join(dataDir, "deploy", "scripts"))).toEqual([]);
  });
});

describe("DeployStore deployments", () => {
  it("makes a version active by a pointer, and a rollback is a pointer moved back", () => {
    expect(store.active("hello")).toBeUndefined();
    const v1 = store.addVersion("hello", upload("export default 1"));
    expect(store.active("hello")).toBeUndefined();
    expect(store.scripts()).toEqual([]);
    const d1 = store.deploy("hello", v1.id);
    expect(store.active("hello")).toEqual({ deployment: d1, version: v1 });
    expect(store.scripts()).toEqual(["hello"]);
    clock.advance(1_000);
    const v2 = store.addVersion("hello", upload("export default 2"));
    const d2 = store.deploy("hello", v2.id, { annotations: { "workers/message": "second" } });
    expect(store.active("hello")?.version.id).toBe(v2.id);
    clock.advance(1_000);
    const back = store.deploy("hello", v1.id, { annotations: { "workers/triggered_by": "rollback" } });
    expect(store.active("hello")?.version.id).toBe(v1.id);
    expect(store.deployments("hello").map((d) => d.id)).toEqual([back.id, d2.id, d1.id]);
    expect(d2).toMatchObject({ sequence: 2, strategy: "percentage", versions: [{ version_id: v2.id, percentage: 100 }] });
    // A new store on the same directory (a restart) finds the same active deployment.
    expect(new DeployStore(dataDir).active("hello")?.deployment.id).toBe(back.id);
  });

  it("refuses to deploy a version the Worker does not have", () => {
    store.addVersion("hello", upload("x"));
    expect(() => store.deploy("hello", "11111111-2222-3333-4444-555555555555")).toThrow(/has no version/);
    expect(store.active("hello")).toBeUndefined();
  });

  it("deletes a Worker whole, and clears what a crash left of a delete", () => {
    const v = store.addVersion("hello", upload("x"));
    store.deploy("hello", v.id);
    store.putSecrets("hello", { TOKEN: "s3cret" });
    expect(store.deleteScript("hello")).toBe(true);
    expect(store.deleteScript("hello")).toBe(false);
    expect(store.has("hello")).toBe(false);
    expect(store.scripts()).toEqual([]);
    const leftover = join(dataDir, "deploy", "scripts", ".deleted-hello-x");
    mkdirSync(leftover);
    new DeployStore(dataDir);
    expect(existsSync(leftover)).toBe(false);
  });
});

describe("DeployStore secrets and settings", () => {
  it("keeps secrets in a 0600 file and lists only their names", () => {
    store.putSecrets("hello", { B: "two", A: "one" });
    store.putSecrets("hello", { A: "uno" });
    const path = join(dataDir, "deploy", "scripts", "hello", "secrets.json");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(store.secretNames("hello")).toEqual(["A", "B"]);
    expect(store.secretValues("hello")).toEqual({ A: "uno", B: "two" });
    expect(store.deleteSecret("hello", "A")).toBe(true);
    expect(store.deleteSecret("hello", "A")).toBe(false);
    expect(store.secretNames("hello")).toEqual(["B"]);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    // No temp file is left beside it.
    expect(readdirSync(join(dataDir, "deploy", "scripts", "hello"))).toEqual(["secrets.json"]);
  });

  it("replaces schedules whole and keeps the rest", () => {
    expect(store.settings("hello")).toMatchObject({ schedules: [], workersDev: true });
    store.updateSettings("hello", { schedules: ["*/5 * * * *"] });
    store.updateSettings("hello", { workersDev: false });
    expect(store.settings("hello")).toMatchObject({ schedules: ["*/5 * * * *"], workersDev: false });
  });
});
