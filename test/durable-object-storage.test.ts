import { expect, test } from "vitest";
import { runHost, tidyAfterEach, type Project } from "./host-harness.ts";

const tidy = tidyAfterEach();

// Three classes whose storage backend comes from the migration history, as on Cloudflare:
// "Notes" is SQLite-backed through a rename of a new_sqlite_classes class, "Legacy" is
// KV-backed (new_classes), and "Gone" was SQLite-backed and then deleted. `bindings` is where
// the Worker that answers HTTP finds them: in its own classes, or in another Worker's.
function write(p: Project, layout: "own" | "other"): string[] {
  const migrations = `
[[migrations]]
tag = "v1"
new_sqlite_classes = ["OldNotes", "Gone"]

[[migrations]]
tag = "v2"
renamed_classes = [{ from = "OldNotes", to = "Notes" }]
new_classes = ["Legacy"]
deleted_classes = ["Gone"]
`;
  const bindings = (scriptName: string) => `
[[durable_objects.bindings]]
name = "NOTES"
class_name = "Notes"${scriptName}

[[durable_objects.bindings]]
name = "LEGACY"
class_name = "Legacy"${scriptName}
`;
  const fetchHandler = `
export default {
  async fetch(request, env) {
    const text = new URL(request.url).searchParams.get("note") ?? "";
    const notes = await env.NOTES.get(env.NOTES.idFromName("one")).add(text);
    const legacy = await env.LEGACY.get(env.LEGACY.idFromName("one")).use();
    return Response.json({ notes, legacy });
  },
};
`;
  const classes = `
import { DurableObject } from "cloudflare:workers";

export class Notes extends DurableObject {
  add(text) {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS notes (text TEXT)");
    this.ctx.storage.sql.exec("INSERT INTO notes (text) VALUES (?)", text);
    return this.ctx.storage.sql.exec("SELECT text FROM notes").toArray().map((r) => r.text);
  }
}

export class Legacy extends DurableObject {
  async use() {
    let sql;
    try {
      this.ctx.storage.sql.exec("SELECT 1");
      sql = "enabled";
    } catch (error) {
      sql = String(error);
    }
    const kv = ((await this.ctx.storage.get("n")) ?? 0) + 1;
    await this.ctx.storage.put("n", kv);
    return { sql, kv };
  }
}
`;
  const head = (name: string) => `name = "${name}"\nmain = "index.js"\ncompatibility_date = "2026-04-01"\n`;
  if (layout === "own") {
    p.write({ "app/wrangler.toml": head("app") + bindings("") + migrations, "app/index.js": classes + fetchHandler });
    return [`${p.dir}/app/wrangler.toml`];
  }
  // The classes' Worker binds none of them: their backends reach workerd without a binding.
  p.write({
    "front/wrangler.toml": head("front") + bindings('\nscript_name = "app"'),
    "front/index.js": fetchHandler,
    "app/wrangler.toml": head("app") + migrations,
    "app/index.js": `${classes}\nexport default { fetch: () => new Response("app") };\n`,
  });
  return [`${p.dir}/front/wrangler.toml`, `${p.dir}/app/wrangler.toml`];
}

test.each([
  ["bound in the Worker that defines them", "own"],
  ["bound only from another Worker (script_name)", "other"],
] as const)("SQLite-backed classes (%s): SQL storage persists across a restart; new_classes stay KV-backed", async (_, layout) => {
  const p = tidy.project();
  const configs = write(p, layout);
  const before = await runHost(configs, p.dataDir);
  try {
    expect(await (await before.fetch("/?note=first")).json()).toEqual({
      notes: ["first"],
      legacy: { sql: expect.stringContaining("SQL is not enabled"), kv: 1 },
    });
  } finally {
    await before.close();
  }
  const h = await tidy.runHost(configs, p.dataDir);
  expect(await (await h.fetch("/?note=second")).json()).toEqual({
    notes: ["first", "second"],
    legacy: { sql: expect.stringContaining("SQL is not enabled"), kv: 2 },
  });
});
