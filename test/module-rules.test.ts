import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { tidyAfterEach } from "./host-harness.ts";

const tidy = tidyAfterEach();

// A WebAssembly module exporting add(i32, i32) -> i32.
const addWasm = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type section: (i32, i32) -> i32
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x07, 0x07, 0x01, 0x03, 0x61, 0x64, 0x64, 0x00, 0x00, // export section: "add" = function 0
  0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b, // code: local.get 0, local.get 1, i32.add
]);
const data = new Uint8Array([0, 1, 2, 127, 128, 254, 255]);

// main is in src/, and one file sits outside it (../assets), as in many wrangler projects: its
// module name must not climb out of modulesRoot, or workerd refuses the Worker.
const worker = `
import note from "./note.txt";
import page from "./pages/page.html";
import query from "./query.sql";
import data from "./data.bin";
import addModule from "./add.wasm";
import sameModule from "./add.wasm?module";
import shared from "../assets/shared.html";

export default {
  async fetch() {
    const instance = await WebAssembly.instantiate(addModule);
    return Response.json({
      note,
      page,
      query,
      shared,
      dataIsArrayBuffer: data instanceof ArrayBuffer,
      dataBytes: [...new Uint8Array(data)],
      wasmIsModule: addModule instanceof WebAssembly.Module,
      sameWasmModule: sameModule === addModule,
      add: instance.exports.add(2, 3),
    });
  },
  async queue(batch) {
    batch.ackAll();
  },
};
`;

// A consumer Worker is bundled again behind the host's queue() shim: its modules must come along.
test.each([
  ["a Worker", ""],
  ["a consumer Worker", `\n[[queues.consumers]]\nqueue = "jobs"\n`],
])("%s gets a string, an ArrayBuffer and a WebAssembly.Module from its imports", async (_, consumers) => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "src/index.js"\ncompatibility_date = "2026-04-01"\n${consumers}`,
    "src/index.js": worker,
    "src/note.txt": "a note ✓",
    "src/pages/page.html": "<p>page</p>\n",
    "src/query.sql": "SELECT 1;",
    "assets/shared.html": "<p>shared</p>",
  });
  writeFileSync(join(p.dir, "src", "data.bin"), data);
  writeFileSync(join(p.dir, "src", "add.wasm"), addWasm);
  const h = await tidy.runHost([config], p.dataDir);

  const response = await h.fetch("/");
  expect(response.status).toBe(200);
  expect(await response.json()).toEqual({
    note: "a note ✓",
    page: "<p>page</p>\n",
    query: "SELECT 1;",
    shared: "<p>shared</p>",
    dataIsArrayBuffer: true,
    dataBytes: [...data],
    wasmIsModule: true,
    sameWasmModule: true,
    add: 5,
  });
});

test("an import of a missing file stops the host with the importing file and line", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.toml": `name = "app"\nmain = "src/index.js"\ncompatibility_date = "2026-04-01"\n`,
    "src/index.js": `// the page\nimport page from "./missing.html";\nexport default { fetch: () => new Response(page) };\n`,
  });
  const started = tidy.runHost([config], p.dataDir);
  await expect(started).rejects.toMatchObject({
    code: "ERR_BUNDLE",
    message: `could not bundle Worker "app":\n${join(p.dir, "src", "index.js")}:2:18: Could not resolve "./missing.html"`,
  });
});
