import type { DeploymentRecord, DeployStore, VersionRecord } from "../deploy/deploy-store.ts";
import { isKnownBinding, type UploadBinding } from "../deploy/upload-metadata.ts";

/**
 * The Workers objects of Cloudflare's REST API as wrangler 4.86 reads them
 * (CLOUDFLARE-API-MAP.md §4, the "recommended" shapes). `last_deployed_from` is always
 * "wrangler": another value makes wrangler pull and diff a dashboard config.
 */

/** An etag for a version: its id without hyphens (stable, and unique per upload). */
const etagOf = (version: VersionRecord): string => version.id.replaceAll("-", "");

export function scriptJson(store: DeployStore, script: string): Record<string, unknown> {
  const versions = store.versions(script);
  const latest = versions[0];
  const active = store.active(script)?.version ?? latest;
  const created = versions.at(-1)?.createdOn ?? new Date(0).toISOString();
  return {
    id: script,
    tag: script,
    tags: [],
    etag: active === undefined ? "" : etagOf(active),
    handlers: [],
    last_deployed_from: "wrangler",
    created_on: created,
    modified_on: latest?.createdOn ?? created,
    usage_model: "standard",
    compatibility_date: active?.compatibilityDate,
    compatibility_flags: active?.compatibilityFlags ?? [],
    ...(active?.migrationTag === undefined ? {} : { migration_tag: active.migrationTag }),
  };
}

export function serviceJson(store: DeployStore, script: string): Record<string, unknown> {
  const body = scriptJson(store, script);
  return {
    id: script,
    default_environment: { environment: "production", created_on: body.created_on, modified_on: body.modified_on, script: body },
    created_on: body.created_on,
    modified_on: body.modified_on,
  };
}

/** Bindings as Cloudflare lists them: a secret's type and name, never its value. */
export function bindingsJson(bindings: readonly UploadBinding[], secretNames: readonly string[]): unknown[] {
  return [
    ...bindings.map((b) => (isKnownBinding(b) && b.type === "secret_text" ? { type: b.type, name: b.name } : b)),
    ...secretNames.filter((name) => !bindings.some((b) => b.name === name)).map((name) => ({ type: "secret_text", name })),
  ];
}

export function versionJson(version: VersionRecord, secretNames: readonly string[] = []): Record<string, unknown> {
  return {
    id: version.id,
    number: version.number,
    metadata: {
      author_id: "",
      author_email: "",
      source: "wrangler",
      created_on: version.createdOn,
      modified_on: version.createdOn,
      has_preview: false,
    },
    annotations: version.annotations,
    resources: {
      script: { etag: etagOf(version), handlers: [], last_deployed_from: "wrangler" },
      script_runtime: {
        compatibility_date: version.compatibilityDate,
        compatibility_flags: version.compatibilityFlags,
        usage_model: "standard",
        limits: {},
      },
      bindings: bindingsJson(version.bindings, secretNames),
    },
    startup_time_ms: 0,
  };
}

export function deploymentJson(deployment: DeploymentRecord): Record<string, unknown> {
  return {
    id: deployment.id,
    created_on: deployment.createdOn,
    source: deployment.source,
    strategy: deployment.strategy,
    author_email: "",
    annotations: deployment.annotations,
    versions: deployment.versions,
  };
}
