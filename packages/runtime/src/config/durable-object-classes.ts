import { showValue, type ConfigWarning } from "./issues.ts";

/**
 * A Worker's Durable Object classes as its `migrations` leave them. On Cloudflare a class's
 * storage backend is fixed by the migration that created it: `new_sqlite_classes` gives it SQLite
 * (and `ctx.storage.sql`), `new_classes` the older KV-backed storage, and a rename keeps the
 * backend. workerd needs the same answer per class, so celld replays the history as `wrangler dev`
 * does (deleted, then renamed, then new classes within each migration) and refuses, as wrangler
 * does, a step that names a class that is not there, or creates one that already is.
 */

export type ClassStorage = "sqlite" | "kv";

/** One `[[migrations]]` entry, as the schema leaves it (lists defaulted to empty). */
export interface MigrationStep {
  tag: string;
  new_classes: string[];
  new_sqlite_classes: string[];
  renamed_classes: { from: string; to: string }[];
  deleted_classes: string[];
  transferred_classes: { from: string; from_script: string; to: string }[];
}

export interface MigrationIssue {
  /** Inside `migrations`: `[1, "renamed_classes", 0, "from"]`. */
  path: (string | number)[];
  message: string;
}

/**
 * The classes the migrations leave, in the order they were created, with their backends; and
 * every step that cannot be applied. A transferred class comes from another Worker, whose backend
 * celld cannot see: it is SQLite-backed here, on which code written for either backend runs.
 */
export function replayMigrations(steps: readonly MigrationStep[]): {
  classes: Map<string, ClassStorage>;
  issues: MigrationIssue[];
} {
  const classes = new Map<string, ClassStorage>();
  const issues: MigrationIssue[] = [];
  const tagAt = new Map<string, number>();
  steps.forEach((step, i) => {
    const earlier = tagAt.get(step.tag);
    if (earlier === undefined) tagAt.set(step.tag, i);
    else {
      // Cloudflare finds the migrations still to apply by the last tag it applied.
      issues.push({ path: [i, "tag"], message: `${showValue(step.tag)} is also the tag of migrations[${earlier}]; each migration needs its own tag` });
    }
    const missing = (what: string, name: string) =>
      `${showValue(name)} ${what}: the migrations up to here leave no class of that name (they leave ${known(classes)})`;
    step.deleted_classes.forEach((name, j) => {
      if (!classes.delete(name)) issues.push({ path: [i, "deleted_classes", j], message: missing("cannot be deleted", name) });
    });
    step.renamed_classes.forEach(({ from, to }, j) => {
      const storage = classes.get(from);
      if (storage === undefined) issues.push({ path: [i, "renamed_classes", j, "from"], message: missing("cannot be renamed", from) });
      else if (classes.has(to)) issues.push({ path: [i, "renamed_classes", j, "to"], message: exists(to) });
      else {
        classes.delete(from);
        classes.set(to, storage);
      }
    });
    const add = (key: "transferred_classes" | "new_classes" | "new_sqlite_classes", name: string, j: number, storage: ClassStorage) => {
      const path = key === "transferred_classes" ? [i, key, j, "to"] : [i, key, j];
      if (classes.has(name)) issues.push({ path, message: exists(name) });
      else classes.set(name, storage);
    };
    step.transferred_classes.forEach(({ to }, j) => add("transferred_classes", to, j, "sqlite"));
    step.new_classes.forEach((name, j) => add("new_classes", name, j, "kv"));
    step.new_sqlite_classes.forEach((name, j) => add("new_sqlite_classes", name, j, "sqlite"));
  });
  return { classes, issues };
}

function exists(name: string): string {
  return `${showValue(name)} is already a class of this Worker at this point of the migrations; a class is created once`;
}

function known(classes: ReadonlyMap<string, ClassStorage>): string {
  return classes.size === 0 ? "none" : [...classes.keys()].map((n) => showValue(n)).join(", ");
}

/**
 * A binding to one of the Worker's own classes that its migrations do not leave: it runs
 * KV-backed here, as under wrangler dev, while a deploy to Cloudflare fails without a migration
 * that creates the class. Said at start, since the first sign would otherwise be `ctx.storage.sql`
 * throwing in a class written for SQLite.
 */
export function unmigratedClassWarnings(
  file: string,
  workerName: string,
  bindings: readonly { class_name: string; script_name?: string | undefined }[],
  steps: readonly MigrationStep[],
): ConfigWarning[] {
  const { classes } = replayMigrations(steps);
  return bindings.flatMap((b, i) =>
    (b.script_name === undefined || b.script_name === workerName) && !classes.has(b.class_name)
      ? [
          {
            file,
            path: `durable_objects.bindings[${i}].class_name`,
            message:
              `${showValue(b.class_name)} is a class of this Worker that no migration leaves: it is KV-backed here ` +
              "(ctx.storage.sql throws), as under wrangler dev, and a deploy to Cloudflare needs a migration that " +
              "creates it; add it to a migration's new_sqlite_classes",
          },
        ]
      : [],
  );
}
