import { showValue } from "./issues.ts";
import { isPlainObject, rawString } from "./raw.ts";

/**
 * The deployment's rules for `route` / `routes` that one file cannot check alone (schema.ts checks
 * each pattern): one of the two keys, not both, as wrangler requires; and a pattern or custom
 * domain belongs to one Worker, as on Cloudflare, where a zone holds each pattern once.
 */
export interface RouteOwner {
  file: string;
  worker: string | undefined;
  located: ((path: string) => string) | undefined;
}

export class RouteRules {
  readonly #owners = new Map<string, { owner: RouteOwner; path: string }>();

  /** The issues of one file's routes, in file order; call for each file of the deployment in turn. */
  check(data: unknown, owner: RouteOwner): { path: string; message: string }[] {
    if (!isPlainObject(data)) return [];
    const issues: { path: string; message: string }[] = [];
    if (data["route"] !== undefined && data["routes"] !== undefined) {
      issues.push({ path: "route", message: "is set beside routes; give one of route or routes (wrangler refuses both)" });
    }
    for (const { path, pattern, customDomain } of routeEntries(data)) {
      const key = `${customDomain ? "domain" : "route"}:${pattern.trim().toLowerCase()}`;
      const earlier = this.#owners.get(key);
      if (earlier === undefined) {
        this.#owners.set(key, { owner, path });
        continue;
      }
      const where = `${earlier.owner.file} (${earlier.owner.located?.(earlier.path) ?? earlier.path})`;
      const whose = earlier.owner.worker === undefined ? "" : ` of Worker ${showValue(earlier.owner.worker)}`;
      const what = customDomain ? "custom domain" : "route pattern";
      issues.push({ path, message: `${what} ${showValue(pattern)} is also ${where}${whose}; a ${what} takes one Worker` });
    }
    return issues;
  }
}

function routeEntries(data: Record<string, unknown>): { path: string; pattern: string; customDomain: boolean }[] {
  const entries: { path: string; value: unknown }[] = [];
  if (data["route"] !== undefined) entries.push({ path: "route", value: data["route"] });
  const list = data["routes"];
  if (Array.isArray(list)) list.forEach((value, i) => entries.push({ path: `routes[${i}]`, value }));
  return entries.flatMap(({ path, value }) => {
    if (typeof value === "string" && value !== "") return [{ path, pattern: value, customDomain: false }];
    const pattern = rawString(value, "pattern");
    if (pattern === undefined || !isPlainObject(value)) return [];
    return [{ path: `${path}.pattern`, pattern, customDomain: value["custom_domain"] === true }];
  });
}
