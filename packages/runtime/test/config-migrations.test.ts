import { describe, expect, test } from "vitest";
import { formatWarnings, parseDeployment } from "../src/config/index.ts";
import { issuesOf, parseOne } from "./config-failure.ts";

const parse = parseOne;

describe("migrations decide each Durable Object class's storage, as on Cloudflare", () => {
  test("the latest state wins: created, renamed (keeping its backend), deleted, transferred in", () => {
    const worker = parse({
      migrations: [
        { tag: "v1", new_classes: ["Kv", "Old"], new_sqlite_classes: ["Sql", "Doomed"] },
        { tag: "v2", renamed_classes: [{ from: "Sql", to: "Notes" }], deleted_classes: ["Doomed"] },
        { tag: "v3", transferred_classes: [{ from: "Theirs", from_script: "other", to: "Arrived" }], new_sqlite_classes: ["Doomed"] },
      ],
    }).workers[0]!;
    expect(worker.durableObjectClasses).toEqual([
      { className: "Kv", storage: "kv" },
      { className: "Old", storage: "kv" },
      { className: "Notes", storage: "sqlite" },
      { className: "Arrived", storage: "sqlite" },
      { className: "Doomed", storage: "sqlite" },
    ]);
  });

  test("no migrations: no classes", () => {
    expect(parse({}).workers[0]!.durableObjectClasses).toEqual([]);
  });

  test("within one migration, deletions come before renames, and renames before new classes, as in wrangler", () => {
    const worker = parse({
      migrations: [
        { tag: "v1", new_classes: ["A"] },
        // A is deleted first, so the new A is a new class (SQLite-backed); B is renamed to C first.
        { tag: "v2", new_sqlite_classes: ["A", "B"], deleted_classes: ["A"] },
        { tag: "v3", new_classes: ["B"], renamed_classes: [{ from: "B", to: "C" }] },
      ],
    }).workers[0]!;
    expect(worker.durableObjectClasses).toEqual([
      { className: "A", storage: "sqlite" },
      { className: "C", storage: "sqlite" },
      { className: "B", storage: "kv" },
    ]);
  });

  test("a step that names a class that is not there, or creates one that is, is refused with its path", () => {
    expect(
      issuesOf({
        migrations: [
          { tag: "v1", new_sqlite_classes: ["A"], deleted_classes: ["Ghost"] },
          { tag: "v2", renamed_classes: [{ from: "Nope", to: "X" }, { from: "A", to: "A2" }], new_classes: ["A2"] },
          { tag: "v3", new_sqlite_classes: ["A2"], transferred_classes: [{ from: "T", from_script: "s", to: "A2" }] },
          { tag: "v2", renamed_classes: [{ from: "A2", to: "A2" }] },
        ],
      }),
    ).toEqual([
      'migrations[0].deleted_classes[0]: "Ghost" cannot be deleted: the migrations up to here leave no class of that name (they leave none)',
      'migrations[1].renamed_classes[0].from: "Nope" cannot be renamed: the migrations up to here leave no class of that name (they leave "A")',
      'migrations[1].new_classes[0]: "A2" is already a class of this Worker at this point of the migrations; a class is created once',
      'migrations[2].transferred_classes[0].to: "A2" is already a class of this Worker at this point of the migrations; a class is created once',
      'migrations[2].new_sqlite_classes[0]: "A2" is already a class of this Worker at this point of the migrations; a class is created once',
      'migrations[3].tag: "v2" is also the tag of migrations[1]; each migration needs its own tag',
      'migrations[3].renamed_classes[0].to: "A2" is already a class of this Worker at this point of the migrations; a class is created once',
    ]);
  });

  test("each key has wrangler's shape", () => {
    expect(
      issuesOf({
        migrations: [
          { new_classes: "A" },
          { tag: "", renamed_classes: [{ from: "A" }], deleted_classes: [1] },
          { tag: "v3", transferred_classes: [{ from: "A", to: "B" }] },
          "v4",
        ],
      }),
    ).toEqual([
      "migrations[0].tag: is required",
      'migrations[0].new_classes: must be an array, got "A"',
      "migrations[1].tag: must not be empty",
      "migrations[1].renamed_classes[0].to: is required",
      "migrations[1].deleted_classes[0]: must be a string, got 1",
      "migrations[2].transferred_classes[0].from_script: is required",
      'migrations[3]: must be an object (TOML table), got "v4"',
    ]);
    expect(issuesOf({ migrations: { tag: "v1" } })).toEqual(["migrations: must be an array, got an object"]);
  });

  test("an unknown key in a migration warns, naming the key it was probably meant to be", () => {
    const deployment = parse({ migrations: [{ tag: "v1", new_sqlite_class: ["A"] }] });
    expect(formatWarnings(deployment.warnings)).toEqual([
      'w.json: migrations[0].new_sqlite_class: is not a key celld knows, so it has no effect (did you mean "new_sqlite_classes"?)',
    ]);
  });
});

describe("warnings about Durable Object storage", () => {
  test("a binding to one of the Worker's own classes that no migration leaves is pointed out; other Workers' classes are theirs", () => {
    const deployment = parseDeployment(
      [
        {
          path: "w.json",
          text: JSON.stringify({
            name: "w",
            main: "index.js",
            compatibility_date: "2026-04-01",
            durable_objects: {
              bindings: [
                { name: "A", class_name: "Migrated" },
                { name: "B", class_name: "Unmigrated" },
                { name: "C", class_name: "Deleted", script_name: "w" },
                { name: "D", class_name: "Elsewhere", script_name: "other" },
              ],
            },
            migrations: [{ tag: "v1", new_sqlite_classes: ["Migrated", "Deleted"] }, { tag: "v2", deleted_classes: ["Deleted"] }],
          }),
        },
        { path: "other.json", text: JSON.stringify({ name: "other", main: "index.js", compatibility_date: "2026-04-01" }) },
      ],
      { fileExists: () => true },
    );
    const why =
      "is a class of this Worker that no migration leaves: it is KV-backed here (ctx.storage.sql throws), as under " +
      "wrangler dev, and a deploy to Cloudflare needs a migration that creates it; add it to a migration's new_sqlite_classes";
    expect(formatWarnings(deployment.warnings)).toEqual([
      `w.json: durable_objects.bindings[1].class_name: "Unmigrated" ${why}`,
      `w.json: durable_objects.bindings[2].class_name: "Deleted" ${why}`,
    ]);
  });

  test("wrangler's later `exports` form is named as not read, with what that costs", () => {
    const deployment = parse({ exports: { Notes: { type: "durable-object", storage: "sqlite" } } });
    expect(formatWarnings(deployment.warnings)).toEqual([
      "w.json: exports: is not read: celld takes Durable Object classes and their storage from `migrations`, as the " +
        "wrangler of its Miniflare does (`exports` came later, in wrangler 4.107); a class declared only here is " +
        "KV-backed under celld, so ctx.storage.sql throws",
    ]);
  });
});
