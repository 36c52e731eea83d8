import { arrangeModuleRules, describeRule, isJavaScriptRule, type ModuleRule } from "./module-rules.ts";
import type { ConfigWarning } from "./issues.ts";

/**
 * What the config's `rules` leave unused, said at start as wrangler says it: a rule after the last
 * one of its type (one without `fallthrough = true`) is never applied, and an import only it
 * matches fails the bundle. A last rule marked `fallthrough = false` says that is meant, and is
 * not warned about. ESModule and CommonJS rules only matter to wrangler without bundling.
 */
export function moduleRuleWarnings(file: string, rules: readonly ModuleRule[]): ConfigWarning[] {
  const warnings: ConfigWarning[] = rules.flatMap((rule, i) =>
    isJavaScriptRule(rule)
      ? [
          {
            file,
            path: `rules[${i}].type`,
            message:
              `"${rule.type}" rules only apply when wrangler does not bundle (no_bundle, find_additional_modules); ` +
              "celld always bundles, so this rule is ignored",
          },
        ]
      : [],
  );
  const unusedBy = new Map<number, string[]>();
  for (const { rule, origin, by } of arrangeModuleRules(rules).unused) {
    if (rules[by]?.fallthrough === false) continue;
    unusedBy.set(by, [...(unusedBy.get(by) ?? []), describeRule(rule, origin)]);
  }
  for (const [by, unused] of unusedBy) {
    const type = rules[by]!.type;
    warnings.push({
      file,
      path: `rules[${by}]`,
      message:
        `is the last ${type} rule, since it does not set fallthrough = true, so ${unused.join(" and ")} ` +
        `${unused.length === 1 ? "is not used, and an import only it matches" : "are not used, and an import only they match"} fails to bundle; set ` +
        "fallthrough = true to use them too, or fallthrough = false to say this is meant",
    });
  }
  return warnings;
}
