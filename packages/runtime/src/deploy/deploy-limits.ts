/**
 * The bounds of what is deployed to `celld serve`, Cloudflare's where Cloudflare has one
 * (developers.cloudflare.com/workers/platform/limits, paid plan). Every place that enforces one
 * imports it from here.
 */
export const deployLimits = {
  /** A Worker's modules together, gzip-compressed: Cloudflare's 10 MB. */
  scriptGzipBytesMax: 10 * 1024 * 1024,
  /** A whole upload request's body, read before it is parsed: Cloudflare's 100 MB request body. */
  uploadBodyBytesMax: 100 * 1024 * 1024,
  /** A secret's value: Cloudflare's 5 KB per environment variable. */
  secretValueBytesMax: 5 * 1024,
  /** Secrets of one Worker. */
  secretsPerScriptMax: 128,
  /** A JSON request body other than an upload (a secret, a deployment, schedules). */
  controlBodyBytesMax: 64 * 1024,
} as const;
