import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** A file the dashboard serves, read once at start: the page is a few tens of KB. */
export interface DashboardFile {
  type: string;
  body: Buffer;
}

export const dashboardPrefix = "/dashboard/";

const siteDir = join(dirname(fileURLToPath(import.meta.url)), "site");
const require = createRequire(import.meta.url);

/**
 * The libraries the page imports, served from the installed packages (no CDN): the path it asks
 * for under /dashboard/vendor/, and the package file. Their ES module builds as published, so no
 * build step runs, now or at start.
 */
const vendorFiles: Record<string, readonly [string, string]> = {
  "preact.mjs": ["preact", "dist/preact.module.js"],
  "preact-hooks.mjs": ["preact", "hooks/dist/hooks.module.js"],
  "htm.mjs": ["htm", "dist/htm.module.js"],
  "uplot.mjs": ["uplot", "dist/uPlot.esm.js"],
  "uplot.css": ["uplot", "dist/uPlot.min.css"],
};

/** The installed package's directory (htm's exports do not list its package.json). */
function packageDir(name: string): string {
  for (const dir of require.resolve.paths(name) ?? []) {
    if (existsSync(join(dir, name, "package.json"))) return join(dir, name);
  }
  throw new Error(`the dashboard needs the package ${name}, which is not installed`);
}

/** preact/hooks imports "preact" by its bare name: the page's import map says where that is. */
const importMap = JSON.stringify({
  imports: {
    preact: "/dashboard/vendor/preact.mjs",
    "preact/hooks": "/dashboard/vendor/preact-hooks.mjs",
    htm: "/dashboard/vendor/htm.mjs",
    uplot: "/dashboard/vendor/uplot.mjs",
  },
});

const types: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

function typeOf(name: string): string {
  return types[name.slice(name.lastIndexOf("."))] ?? "application/octet-stream";
}

/**
 * Scripts from this origin only, plus the one inline import map by its hash; no inline script or
 * style otherwise, no eval, nothing loaded from elsewhere, no framing.
 */
export const dashboardCsp = [
  "default-src 'none'",
  `script-src 'self' 'sha256-${createHash("sha256").update(importMap).digest("base64")}'`,
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

let loaded: Map<string, DashboardFile> | undefined;

/** Every file by its path under /dashboard/ ("" is the page itself). */
export function dashboardFiles(): ReadonlyMap<string, DashboardFile> {
  if (loaded !== undefined) return loaded;
  const files = new Map<string, DashboardFile>();
  for (const name of readdirSync(siteDir)) {
    // The page's own files; not the tsconfig.json that checks them.
    if (!(name.slice(name.lastIndexOf(".")) in types)) continue;
    let body = readFileSync(join(siteDir, name));
    if (name === "index.html") body = Buffer.from(body.toString("utf8").replace("<!--import-map-->", `<script type="importmap">${importMap}</script>`));
    files.set(name === "index.html" ? "" : name, { type: typeOf(name), body });
  }
  for (const [name, [pkg, file]] of Object.entries(vendorFiles)) {
    files.set(`vendor/${name}`, { type: typeOf(name), body: readFileSync(join(packageDir(pkg), file)) });
  }
  loaded = files;
  return files;
}
