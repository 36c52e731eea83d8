import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { bundleWorker } from "../src/bundle/bundle.ts";
import { parseDeployment } from "../src/config/index.ts";
import { addsListener } from "../src/worker-code/service-worker-listeners.ts";

const dir = mkdtempSync(join(tmpdir(), "celld-sw-listeners-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The script as the host reads it: bundled by esbuild, as a service-worker script. */
async function bundled(name: string, source: string): Promise<string> {
  writeFileSync(join(dir, `${name}.js`), source);
  const config = { name, main: `${name}.js`, compatibility_date: "2026-04-01" };
  const [worker] = parseDeployment([{ path: join(dir, `${name}.json`), text: JSON.stringify(config) }]).workers;
  const bundle = await bundleWorker(worker!);
  expect(bundle.modules).toBe(false);
  return bundle.code;
}

test.each([
  ["queue", "double quotes", 'addEventListener("queue", (e) => {});', "yes"],
  ["queue", "single quotes, through self", "self.addEventListener('queue', (e) => {});", "yes"],
  ["queue", "a template literal with nothing in it", "globalThis.addEventListener(`queue`, (e) => {});", "yes"],
  ["queue", "a listener for fetch and one for scheduled only", "addEventListener('fetch', (e) => {});\naddEventListener(\"scheduled\", () => {});", "no"],
  ["queue", "no listener at all, the word queue in a string", 'const note = "queue";\naddEventListener("fetch", () => note);', "no"],
  ["queue", "an event named by a variable", 'const type = "queue";\naddEventListener(type, (e) => {});', "unknown"],
  ["queue", "an event named by a template with a value in it", 'const q = "queue";\naddEventListener(`${q}`, (e) => {});\naddEventListener("fetch", () => {});', "unknown"],
  ["queue", "through the global scope's prototype, with call()", 'Object.getPrototypeOf(self).addEventListener.call(self, "queue", (e) => {});', "yes"],
  ["queue", "a fetch listener through the prototype only", 'Object.getPrototypeOf(self).addEventListener.call(self, "fetch", (e) => {});', "no"],
  ["queue", "added with apply()", 'const proto = Object.getPrototypeOf(self);\nproto.addEventListener.apply(self, ["queue", (e) => {}]);\naddEventListener("fetch", () => {});', "unknown"],
  ["queue", "addEventListener kept under another name", 'const listen = addEventListener;\nlisten("queue", (e) => {});\naddEventListener("fetch", () => {});', "unknown"],
  ["queue", "a listener in a comment only", '// addEventListener("queue", ...)\naddEventListener("fetch", () => {});', "no"],
  ["scheduled", "a scheduled listener", 'addEventListener("scheduled", (e) => {});\naddEventListener("fetch", () => {});', "yes"],
  ["scheduled", "a scheduled listener through the prototype", 'Object.getPrototypeOf(self).addEventListener.call(self, `scheduled`, (e) => {});', "yes"],
  ["scheduled", "fetch and queue listeners only", 'addEventListener("fetch", () => {});\naddEventListener("queue", () => {});', "no"],
  ["scheduled", "an event named by a variable", 'const type = "scheduled";\naddEventListener(type, (e) => {});', "unknown"],
] as const)("%s listener, %s: %s", async (type, _, source, expected) => {
  const code = await bundled(`w${Math.random().toString(36).slice(2)}`, `${source}\n`);
  expect(addsListener(code, type)).toBe(expected);
});
