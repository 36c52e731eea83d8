import { limits } from "@celld/queue-cell";
import { z } from "zod";
import { showValue } from "./issues.ts";
import type { AssetsRouteRules } from "./model.ts";

const { assetsRouteRulesMax, assetsRouteRuleCharsMax } = limits;

/**
 * `[assets] run_worker_first`: true or false, or route rules as wrangler takes them: `/api/*`
 * sends the paths it matches to the Worker first, `!/api/docs/*` keeps paths on the files
 * whatever else matches. Checked as wrangler 4 checks them before a deploy (rule shape, at least
 * one positive rule, no duplicate, none made redundant by a wider `*` rule, the two bounds), so
 * a config celld takes deploys too.
 */
export const runWorkerFirstSchema = z
  .unknown()
  // One refinement rather than a union: zod reports a failed union with the union's message alone,
  // and a rule's own message (with its index) would be lost.
  .superRefine((value, ctx) => {
    if (typeof value === "boolean") return;
    if (Array.isArray(value)) return checkRules(value, ctx);
    ctx.addIssue({
      code: "custom",
      message: `must be true, false or an array of route rules ("/api/*", "!/api/docs/*"), got ${showValue(value)}`,
    });
  })
  .transform((value) => value as boolean | string[]);

function checkRules(entries: unknown[], ctx: z.RefinementCtx): void {
  const fail = (message: string, index?: number) =>
    ctx.addIssue({ code: "custom", message, ...(index === undefined ? {} : { path: [index] }) });
  const strings = entries.map((entry, index) => {
    if (typeof entry !== "string") fail(`must be a route rule string, got ${showValue(entry)}`, index);
    return entry;
  });
  if (!strings.every((entry) => typeof entry === "string")) return;
  const rules = strings as string[];
  if (rules.length === 0) return fail('must hold at least one rule, such as "/api/*"');
  if (rules.length > assetsRouteRulesMax) {
    return fail(`must hold at most ${assetsRouteRulesMax} rules, got ${rules.length}`);
  }
  const seen = new Set<string>();
  rules.forEach((rule, index) => {
    if (!rule.startsWith("/") && !rule.startsWith("!/")) {
      fail(`must start with "/" (to the Worker first) or "!/" (to the files first), got ${showValue(rule)}`, index);
    } else if (rule.length > assetsRouteRuleCharsMax) {
      fail(`must be at most ${assetsRouteRuleCharsMax} characters, got ${rule.length}`, index);
    } else if (seen.has(rule)) {
      fail(`${showValue(rule)} is a duplicate`, index);
    } else {
      const wider = rules.find((other) => other !== rule && other.endsWith("*") && rule.startsWith(other.slice(0, -1)) && sameSign(rule, other));
      if (wider !== undefined) fail(`${showValue(rule)} is redundant: ${showValue(wider)} matches all it matches`, index);
    }
    seen.add(rule);
  });
  if (rules.every((rule) => rule.startsWith("!"))) fail('must hold a rule that is not negative (such as "/api/*"): only negative rules send nothing to the Worker');
}

function sameSign(a: string, b: string): boolean {
  return a.startsWith("!") === b.startsWith("!");
}

/** The config's value as the model keeps it; false when unset. */
export function assetsRouteRules(value: boolean | string[] | undefined): boolean | AssetsRouteRules {
  if (value === undefined || typeof value === "boolean") return value ?? false;
  return {
    worker: value.filter((rule) => !rule.startsWith("!")),
    assets: value.filter((rule) => rule.startsWith("!")).map((rule) => rule.slice(1)),
  };
}
