import { join } from "node:path";
import { expect, test } from "vitest";
import { tidyAfterEach } from "./host-harness.ts";

const tidy = tidyAfterEach();

// The config's bundling keys that are plain esbuild options: what the Worker runs is what
// wrangler would have bundled.
test("define replaces names in the code, and alias replaces imports (packages and Node built-ins too), resolved from the config's directory", async () => {
  const p = tidy.project();
  const config = p.write({
    "app/wrangler.toml": `
name = "app"
main = "src/index.js"
compatibility_date = "2026-04-01"

[define]
__VERSION__ = '"1.2.3"'
"process.env.MODE" = '"production"'
DEBUG = "false"

[alias]
"not-installed" = "./shims/lib.js"
"node:crypto" = "./shims/crypto.js"
`,
    "app/src/index.js": `
import { name } from "not-installed";
import { randomUUID } from "node:crypto";
export default {
  fetch: () => Response.json({ version: __VERSION__, mode: process.env.MODE, debug: DEBUG, name, uuid: randomUUID() }),
};
`,
    // Relative to the config file, not to the importing file.
    "app/shims/lib.js": `export const name = "from the shim";\n`,
    "app/shims/crypto.js": `export const randomUUID = () => "not random";\n`,
  });
  const h = await tidy.runHost([config], p.dataDir);
  expect(await (await h.fetch("/")).json()).toEqual({
    version: "1.2.3",
    mode: "production",
    debug: false,
    name: "from the shim",
    uuid: "not random",
  });
});

test("an alias whose target cannot be resolved stops the start, naming the alias and the import", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\nalias = { lib = "./nowhere.js" }\n`,
    "index.js": `import lib from "lib";\nexport default { fetch: () => new Response(lib) };\n`,
  });
  await expect(tidy.runHost([config], p.dataDir)).rejects.toMatchObject({
    code: "ERR_BUNDLE",
    message: `could not bundle Worker "app":\n${join(p.dir, "index.js")}:1:17: alias "lib" = "./nowhere.js": Could not resolve "./nowhere.js"`,
  });
});

test("[[rules]] come before wrangler's defaults: a fallthrough rule adds to them, one without replaces its type's default", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `
name = "app"
main = "src/index.js"
compatibility_date = "2026-04-01"

[[rules]]
type = "Text"
globs = ["**/*.md"]
fallthrough = true

[[rules]]
type = "Data"
globs = ["**/*.png"]
`,
    "src/index.js": `
import readme from "../README.md";
import note from "./note.txt";
import logo from "./logo.png";
export default {
  fetch: () => Response.json({ readme, note, logoIsArrayBuffer: logo instanceof ArrayBuffer, logo: [...new Uint8Array(logo)] }),
};
`,
    "README.md": "# app\n",
    "src/note.txt": "a note",
    "src/logo.png": "\u0001\u0002",
  });
  const h = await tidy.runHost([config], p.dataDir);
  expect(await (await h.fetch("/")).json()).toEqual({ readme: "# app\n", note: "a note", logoIsArrayBuffer: true, logo: [1, 2] });
});

test("an import only a rule left unused matches stops the start, naming the rule and the one that shadows it", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\nrules = [{ type = "Data", globs = ["**/*.png"] }]\n`,
    "index.js": `import data from "./data.bin";\nexport default { fetch: () => new Response(data) };\n`,
    "data.bin": "x",
  });
  await expect(tidy.runHost([config], p.dataDir)).rejects.toMatchObject({
    code: "ERR_BUNDLE",
    message:
      `could not bundle Worker "app":\n${join(p.dir, "index.js")}:1:18: "./data.bin" matches wrangler's default Data rule ("**/*.bin"), ` +
      "which is not used: rules[0] is the last Data rule, since it does not set fallthrough = true",
  });
});
