import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { deployLimits } from "../src/deploy/deploy-limits.ts";
import { checkScriptSize, parseUploadForm } from "../src/deploy/upload-form.ts";
import { applyUploadMigrations } from "../src/deploy/upload-metadata.ts";

/** A body as wrangler builds it: undici's FormData, encoded by a Request. */
async function encode(metadata: unknown, parts: { name: string; type: string; body: string | Uint8Array }[]) {
  const form = new FormData();
  form.set("metadata", typeof metadata === "string" ? metadata : JSON.stringify(metadata));
  for (const p of parts) form.set(p.name, new File([p.body], p.name, { type: p.type }));
  const request = new Request("http://celld.invalid/", { method: "PUT", body: form });
  return { body: new Uint8Array(await request.arrayBuffer()), contentType: request.headers.get("content-type")! };
}

const main = { name: "index.js", type: "application/javascript+module", body: "export default { fetch() { return new Response('hi') } }" };

describe("parseUploadForm", () => {
  it("reads wrangler's metadata and modules, main first, a leading ./ dropped, source maps left out", async () => {
    const { body, contentType } = await encode(
      {
        main_module: "index.js",
        compatibility_date: "2025-01-01",
        compatibility_flags: ["nodejs_compat"],
        bindings: [
          { name: "GREETING", type: "plain_text", text: "hi" },
          { name: "JSONV", type: "json", json: { a: 1 } },
          { name: "KV", type: "kv_namespace", namespace_id: "kv1" },
          { type: "queue", name: "Q", queue_name: "jobs" },
          { name: "DB", type: "d1", id: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" },
        ],
        observability: { enabled: false },
      },
      [
        { name: "./f57-hello.txt", type: "text/plain", body: "hello\n" },
        main,
        { name: "index.js.map", type: "application/source-map", body: "{}" },
      ],
    );
    const upload = await parseUploadForm(body, contentType);
    expect(upload.mainModule).toBe("index.js");
    expect(upload.modules.map((m) => [m.name, m.contentType])).toEqual([
      ["index.js", "application/javascript+module"],
      ["f57-hello.txt", "text/plain"],
    ]);
    expect(Buffer.from(upload.modules[1]!.bytes).toString()).toBe("hello\n");
    expect(upload.metadata.compatibility_flags).toEqual(["nodejs_compat"]);
    expect(upload.metadata.bindings).toHaveLength(5);
    expect(upload.warnings).toEqual([]);
  });

  it("keeps a binding of a type celld does not run, with a warning", async () => {
    const { body, contentType } = await encode({ main_module: "index.js", bindings: [{ name: "AI", type: "ai" }] }, [main]);
    const upload = await parseUploadForm(body, contentType);
    expect(upload.warnings).toEqual(['binding "AI" of type "ai" is not run by celld: the Worker\'s env has no AI']);
  });

  const refusals: [string, () => Promise<{ body: Uint8Array; contentType: string }>, RegExp][] = [
    ["not multipart", async () => ({ body: Buffer.from("{}"), contentType: "application/json" }), /must be multipart\/form-data/],
    ["malformed multipart", async () => ({ body: Buffer.from("garbage"), contentType: "multipart/form-data; boundary=x" }), /not readable multipart/],
    ["no metadata", async () => { const e = await encode("{}", [main]); return { ...e, body: Buffer.from(Buffer.from(e.body).toString("latin1").replace('name="metadata"', 'name="meta"'), "latin1") }; }, /no "metadata" part/],
    ["metadata not JSON", () => encode("{nope", [main]), /metadata part is not valid JSON/],
    ["no main module named", () => encode({ bindings: [] }, [main]), /main_module \(or body_part/],
    ["main module missing", () => encode({ main_module: "worker.js" }, [main]), /main_module is "worker.js" but no part of the upload has that name \(parts: index.js\)/],
    ["a module climbing out", () => encode({ main_module: "index.js" }, [main, { name: "../x.txt", type: "text/plain", body: "x" }]), /module name "..\/x.txt" is not valid/],
    ["python", () => encode({ main_module: "index.js" }, [main, { name: "a.py", type: "text/x-python", body: "x" }]), /module "a.py" has content type "text\/x-python"/],
    ["a binding missing a field", () => encode({ main_module: "index.js", bindings: [{ name: "KV", type: "kv_namespace" }] }, [main]), /metadata.bindings\[0\] \("KV"\): namespace_id/],
    ["a name bound twice", () => encode({ main_module: "index.js", bindings: [{ name: "A", type: "plain_text", text: "1" }, { name: "A", type: "plain_text", text: "2" }] }, [main]), /bindings\[1\]: the name "A" is bound twice/],
    ["keep_assets not a boolean", () => encode({ main_module: "index.js", keep_assets: "yes" }, [main]), /metadata: keep_assets/],
    ["an assets config of another kind", () => encode({ main_module: "index.js", assets: { jwt: "x", config: { not_found_handling: "teapot" } } }, [main]), /metadata: assets.config.not_found_handling/],
    ["a bad compatibility date", () => encode({ main_module: "index.js", compatibility_date: "soon" }, [main]), /compatibility_date: must be a date YYYY-MM-DD/],
  ];
  it.each(refusals)("refuses %s with code 10021", async (_, make, message) => {
    const { body, contentType } = await make();
    await expect(parseUploadForm(body, contentType)).rejects.toMatchObject({ code: 10021, status: 400, message: expect.stringMatching(message) });
  });

  it("takes a Worker of exactly the gzip bound and refuses one byte more", () => {
    expect(() => checkScriptSize(deployLimits.scriptGzipBytesMax)).not.toThrow();
    expect(() => checkScriptSize(deployLimits.scriptGzipBytesMax + 1)).toThrow(
      `the Worker's modules are ${deployLimits.scriptGzipBytesMax + 1} bytes gzip-compressed, over the bound of ${deployLimits.scriptGzipBytesMax}`,
    );
  });

  it("measures an upload's modules gzip-compressed: random bytes over the bound are refused", async () => {
    const blob = randomBytes(deployLimits.scriptGzipBytesMax + 1024);
    const { body, contentType } = await encode({ main_module: "index.js" }, [main, { name: "blob.bin", type: "application/octet-stream", body: blob }]);
    await expect(parseUploadForm(body, contentType)).rejects.toMatchObject({ code: 10027, status: 413 });
    // The same bytes compress far under the bound when they repeat.
    const zeros = await encode({ main_module: "index.js" }, [main, { name: "blob.bin", type: "application/octet-stream", body: new Uint8Array(blob.length) }]);
    await expect(parseUploadForm(zeros.body, zeros.contentType)).resolves.toMatchObject({ mainModule: "index.js" });
  });
});

describe("applyUploadMigrations", () => {
  const none = { classes: [], tag: undefined };
  it("creates, renames and deletes classes from the Worker's last tag", () => {
    const first = applyUploadMigrations(none, { new_tag: "v1", steps: [{ new_sqlite_classes: ["Counter"], new_classes: ["Old"], renamed_classes: [], deleted_classes: [], transferred_classes: [] }] });
    expect(first).toEqual({ classes: [{ className: "Old", storage: "kv" }, { className: "Counter", storage: "sqlite" }], tag: "v1" });
    const second = applyUploadMigrations(first, { old_tag: "v1", new_tag: "v2", steps: [{ new_classes: [], new_sqlite_classes: [], renamed_classes: [{ from: "Counter", to: "Tally" }], deleted_classes: ["Old"], transferred_classes: [] }] });
    expect(second).toEqual({ classes: [{ className: "Tally", storage: "sqlite" }], tag: "v2" });
    expect(applyUploadMigrations(second, undefined)).toBe(second);
  });

  it("refuses an old_tag that is not the Worker's, and a step naming a missing class", () => {
    expect(() => applyUploadMigrations(none, { old_tag: "v1", new_tag: "v2", steps: [] })).toThrow(
      'metadata.migrations.old_tag is "v1" but the last migration applied to this Worker is null',
    );
    expect(() =>
      applyUploadMigrations(none, { new_tag: "v1", steps: [{ new_classes: [], new_sqlite_classes: [], renamed_classes: [], deleted_classes: ["Ghost"], transferred_classes: [] }] }),
    ).toThrow(/metadata.migrations.steps\[0\].deleted_classes.0: "Ghost" cannot be deleted/);
  });
});
