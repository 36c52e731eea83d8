import { z } from "zod";
import { replayMigrations, type MigrationStep } from "../config/durable-object-classes.ts";
import { DeployError } from "./deploy-errors.ts";

/**
 * The `metadata` part of a script or version upload, as wrangler 4.86 writes it
 * (CLOUDFLARE-API-MAP.md §3). Only what celld acts on is typed; other keys (logpush, placement,
 * observability, limits, tail_consumers...) are accepted and left alone, as `messages` say.
 */

const str = z.string();
const name = z.string().min(1);

/** The binding types celld runs; each keeps the fields wrangler sends. */
const knownBinding = z.discriminatedUnion("type", [
  z.object({ type: z.literal("plain_text"), name, text: str }),
  z.object({ type: z.literal("json"), name, json: z.unknown() }),
  z.object({ type: z.literal("secret_text"), name, text: str }),
  z.object({ type: z.literal("kv_namespace"), name, namespace_id: name }),
  z.object({ type: z.literal("d1"), name, id: name, database_name: str.optional() }),
  z.object({ type: z.literal("r2_bucket"), name, bucket_name: name, jurisdiction: str.optional() }),
  z.object({
    type: z.literal("durable_object_namespace"),
    name,
    class_name: name,
    script_name: name.optional(),
    environment: str.optional(),
  }),
  z.object({ type: z.literal("service"), name, service: name, entrypoint: name.optional(), environment: str.optional() }),
  z.object({ type: z.literal("queue"), name, queue_name: name, delivery_delay: z.number().int().min(0).optional() }),
  z.object({ type: z.literal("inherit"), name, old_name: name.optional(), version_id: str.optional() }),
  z.object({ type: z.literal("assets"), name }),
]);

export type KnownBinding = z.infer<typeof knownBinding>;
/** A binding celld does not run (AI, analytics, browser, ...): kept in the record, not given to the Worker. */
export type OtherBinding = { type: string; name: string };
export type UploadBinding = KnownBinding | OtherBinding;

const knownTypes = new Set(knownBinding.options.map((o) => o.shape.type.value as string));

export function isKnownBinding(binding: UploadBinding): binding is KnownBinding {
  return knownTypes.has(binding.type);
}

const migrationStep = z.object({
  new_classes: z.array(name).default([]),
  new_sqlite_classes: z.array(name).default([]),
  renamed_classes: z.array(z.object({ from: name, to: name })).default([]),
  deleted_classes: z.array(name).default([]),
  transferred_classes: z.array(z.object({ from: name, from_script: name, to: name })).default([]),
});

const metadataSchema = z.looseObject({
  main_module: name.optional(),
  body_part: name.optional(),
  bindings: z.array(z.looseObject({ type: name, name })).default([]),
  compatibility_date: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date YYYY-MM-DD").optional(),
  compatibility_flags: z.array(name).default([]),
  keep_bindings: z.array(name).default([]),
  // wrangler's [assets]: the completion token of its assets upload, and how the files are served.
  assets: z
    .object({
      jwt: name,
      config: z
        .looseObject({
          html_handling: z.enum(["auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none"]).optional(),
          not_found_handling: z.enum(["single-page-application", "404-page", "none"]).optional(),
          run_worker_first: z.union([z.boolean(), z.array(z.string())]).optional(),
          _redirects: z.string().optional(),
          _headers: z.string().optional(),
        })
        .default({}),
    })
    .optional(),
  annotations: z.record(z.string(), z.string()).default({}),
  migrations: z
    .object({
      old_tag: name.optional(),
      new_tag: name.optional(),
      steps: z.array(migrationStep).default([]),
    })
    .optional(),
  // `wrangler versions secret put`: the new version keeps the previous one's assets.
  keep_assets: z.boolean().optional(),
});

export type UploadMetadata = z.infer<typeof metadataSchema> & { bindings: UploadBinding[] };

/**
 * Parses the metadata part's text. A binding of a known type with wrong fields is refused by its
 * index and field; one of a type celld does not run is kept and named in `warnings`.
 */
export function parseUploadMetadata(text: string): { metadata: UploadMetadata; warnings: string[] } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new DeployError("invalid_upload", `the metadata part is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = metadataSchema.safeParse(raw);
  if (!parsed.success) throw new DeployError("invalid_upload", `metadata: ${describe(parsed.error)}`);
  const warnings: string[] = [];
  for (const key of ["_redirects", "_headers"] as const) {
    if (parsed.data.assets?.config[key] !== undefined) warnings.push(`assets ${key} files are not applied by celld serve`);
  }
  const bindings: UploadBinding[] = parsed.data.bindings.map((binding, i) => {
    if (!knownTypes.has(binding.type)) {
      warnings.push(`binding "${binding.name}" of type "${binding.type}" is not run by celld: the Worker's env has no ${binding.name}`);
      return { ...binding };
    }
    const known = knownBinding.safeParse(binding);
    if (!known.success) throw new DeployError("invalid_upload", `metadata.bindings[${i}] ("${binding.name}"): ${describe(known.error)}`);
    return known.data;
  });
  const names = new Set<string>();
  bindings.forEach((b, i) => {
    if (names.has(b.name)) throw new DeployError("invalid_upload", `metadata.bindings[${i}]: the name "${b.name}" is bound twice`);
    names.add(b.name);
  });
  if (parsed.data.main_module === undefined && parsed.data.body_part === undefined) {
    throw new DeployError("invalid_upload", "metadata: main_module (or body_part, for a service-worker script) is required");
  }
  return { metadata: { ...parsed.data, bindings }, warnings };
}

function describe(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.length === 0 ? "" : `${issue.path.join(".")}: `}${issue.message}`).join("; ");
}

/**
 * Applies the upload's migrations to the classes the Worker has, as Cloudflare does: `old_tag` must
 * be the tag last applied (none for a new Worker), and each step must name classes that exist.
 */
export function applyUploadMigrations(
  current: { classes: { className: string; storage: "sqlite" | "kv" }[]; tag: string | undefined },
  migrations: UploadMetadata["migrations"],
): { classes: { className: string; storage: "sqlite" | "kv" }[]; tag: string | undefined } {
  if (migrations === undefined || (migrations.steps.length === 0 && migrations.new_tag === undefined)) return current;
  if ((migrations.old_tag ?? undefined) !== current.tag) {
    throw new DeployError(
      "invalid_upload",
      `metadata.migrations.old_tag is ${JSON.stringify(migrations.old_tag ?? null)} but the last migration applied to this Worker is ` +
        `${JSON.stringify(current.tag ?? null)}`,
    );
  }
  // The classes the Worker has, as one first step, then the uploaded steps: replayMigrations checks each.
  const prior: MigrationStep = {
    tag: "(applied before)",
    new_classes: current.classes.filter((c) => c.storage === "kv").map((c) => c.className),
    new_sqlite_classes: current.classes.filter((c) => c.storage === "sqlite").map((c) => c.className),
    renamed_classes: [],
    deleted_classes: [],
    transferred_classes: [],
  };
  const steps = migrations.steps.map((s, i): MigrationStep => ({ ...s, tag: `(step ${i})` }));
  const { classes, issues } = replayMigrations([prior, ...steps]);
  const first = issues[0];
  if (first !== undefined) {
    const [index, ...rest] = first.path;
    throw new DeployError("invalid_upload", `metadata.migrations.steps[${Number(index) - 1}].${rest.join(".")}: ${first.message}`);
  }
  return {
    classes: [...classes].map(([className, storage]) => ({ className, storage })),
    tag: migrations.new_tag ?? current.tag,
  };
}
