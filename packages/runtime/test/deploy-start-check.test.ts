import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { WorkerConfig } from "../src/config/index.ts";
import { checkWorkersStart } from "../src/deploy/start-check.ts";

const dir = mkdtempSync(join(tmpdir(), "celld-start-check-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function worker(name: string, code: string, extra: Partial<WorkerConfig> = {}): WorkerConfig {
  writeFileSync(join(dir, `${name}.js`), code);
  return {
    configPath: join(dir, "version.json"),
    name,
    main: join(dir, `${name}.js`),
    compatibilityDate: "2025-01-01",
    compatibilityFlags: [],
    vars: {},
    devVars: undefined,
    producers: [],
    consumers: [],
    kvNamespaces: [],
    d1Databases: [],
    r2Buckets: [],
    durableObjects: [],
    durableObjectClasses: [],
    services: [],
    crons: [],
    define: {},
    alias: {},
    assets: undefined,
    moduleRules: [],
    ...extra,
  } as WorkerConfig;
}

describe("checkWorkersStart (real workerd, no storage)", () => {
  it("passes Workers that start, a binding to a Worker not deployed included (the host's stand-in)", async () => {
    const built = await checkWorkersStart([worker("fine", "export default { fetch() { return new Response('x') } }")]);
    expect([...built.keys()]).toEqual(["fine"]);
    await expect(checkWorkersStart([worker("lonely", "export default {}", { services: [{ binding: "OTHER", service: "ghost" }] })])).resolves.toBeDefined();
  });

  it.each([
    ["a syntax error", worker("syntax", "export default { fetch() {"), /^Worker "syntax" could not be built: syntax\.js:1:\d+: .*end of file/],
    ["a throw at load", worker("throws", "throw new Error('boom at load'); export default {}"), /^the Worker could not start: Worker "throws": Uncaught Error: boom at load$/],
    ["an unknown flag", worker("flag", "export default {}", { compatibilityFlags: ["no_such_flag"] }), /No such compatibility flag: no_such_flag/],
  ])("refuses %s with 10021 and workerd's words", async (_, w, message) => {
    await expect(checkWorkersStart([w])).rejects.toMatchObject({ code: 10021, status: 400, message: expect.stringMatching(message) });
  });
});
