import { gzipSync } from "node:zlib";
import { DeployError } from "./deploy-errors.ts";
import { deployLimits } from "./deploy-limits.ts";
import { checkModuleName } from "./deploy-names.ts";
import { parseUploadMetadata, type UploadMetadata } from "./upload-metadata.ts";

/**
 * A script or version upload, read from the multipart/form-data body wrangler sends
 * (CLOUDFLARE-API-MAP.md §3): a `metadata` field, then one file part per module named by its path
 * in the bundle. Source maps are dropped: workerd does not read them. Bundling is already done by
 * wrangler; celld stores the modules as they came.
 */

export interface UploadedModule {
  /** As its importers name it, without a leading `./`. */
  name: string;
  contentType: string;
  bytes: Uint8Array;
}

export interface ParsedUpload {
  metadata: UploadMetadata;
  /** The main module first. */
  modules: UploadedModule[];
  mainModule: string;
  /** Said back to wrangler in the envelope's `messages`: what celld does not run. */
  warnings: string[];
}

/** Module content types celld runs, and workerd's module type for each. */
export const moduleTypes: Readonly<Record<string, "ESModule" | "CommonJS" | "Text" | "Data" | "CompiledWasm">> = {
  "application/javascript+module": "ESModule",
  "application/javascript": "CommonJS",
  "text/javascript": "ESModule",
  "text/plain": "Text",
  "application/octet-stream": "Data",
  "application/wasm": "CompiledWasm",
};

const ignoredTypes = new Set(["application/source-map"]);

export async function parseUploadForm(body: Uint8Array, contentType: string | undefined): Promise<ParsedUpload> {
  if (contentType === undefined || !/^multipart\/form-data\s*;/i.test(contentType)) {
    throw new DeployError("invalid_upload", `an upload must be multipart/form-data with a boundary, got content type ${JSON.stringify(contentType ?? null)}`);
  }
  if (body.length > deployLimits.uploadBodyBytesMax) {
    throw new DeployError("too_large", `the upload is ${body.length} bytes, over the bound of ${deployLimits.uploadBodyBytesMax}`);
  }
  let form: FormData;
  try {
    form = await new Response(body, { headers: { "content-type": contentType } }).formData();
  } catch (error) {
    throw new DeployError("invalid_upload", `the upload is not readable multipart/form-data (${(error as Error).message})`);
  }
  const metadataPart = form.get("metadata");
  if (metadataPart === null) throw new DeployError("invalid_upload", 'the upload has no "metadata" part');
  const metadataText = typeof metadataPart === "string" ? metadataPart : await metadataPart.text();
  const { metadata, warnings } = parseUploadMetadata(metadataText);
  const modules: UploadedModule[] = [];
  for (const [partName, value] of form) {
    if (partName === "metadata") continue;
    if (typeof value === "string") throw new DeployError("invalid_upload", `part "${partName}" is a plain field; a module must be a file part with a content type`);
    const type = value.type.split(";")[0]!.trim().toLowerCase();
    if (ignoredTypes.has(type)) continue;
    if (!(type in moduleTypes)) {
      throw new DeployError("invalid_upload", `module "${partName}" has content type ${JSON.stringify(value.type)}; celld runs ${Object.keys(moduleTypes).join(", ")}`);
    }
    modules.push({ name: checkModuleName(partName), contentType: type, bytes: new Uint8Array(await value.arrayBuffer()) });
  }
  const mainModule = checkModuleName(metadata.main_module ?? metadata.body_part!);
  const main = modules.find((m) => m.name === mainModule);
  if (main === undefined) {
    throw new DeployError("invalid_upload", `metadata.main_module is "${mainModule}" but no part of the upload has that name (parts: ${modules.map((m) => m.name).join(", ") || "none"})`);
  }
  checkScriptSize(gzipSync(Buffer.concat(modules.map((m) => m.bytes))).length);
  return { metadata, modules: [main, ...modules.filter((m) => m !== main)], mainModule, warnings };
}

/** The bound on a Worker's size, as Cloudflare counts it: its modules together, gzip-compressed. */
export function checkScriptSize(gzipBytes: number): void {
  if (gzipBytes > deployLimits.scriptGzipBytesMax) {
    throw new DeployError("too_large", `the Worker's modules are ${gzipBytes} bytes gzip-compressed, over the bound of ${deployLimits.scriptGzipBytesMax}`);
  }
}
