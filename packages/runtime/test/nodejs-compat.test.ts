import { expect, test } from "vitest";
import { resolveNodejsCompat, runtimeCompatibilityFlags } from "../src/config/nodejs-compat.ts";

// As workerd and wrangler (4.122+) read a date and flags.
test.each([
  ["2026-08-03", [], false, false],
  ["2026-08-04", [], true, true],
  ["2026-10-06", ["no_nodejs_compat"], false, true],
  ["2026-10-06", ["no_nodejs_compat", "no_nodejs_compat_v2"], false, false],
  ["2024-09-22", ["nodejs_compat"], true, false],
  ["2024-09-23", ["nodejs_compat"], true, true],
  ["2024-09-23", ["nodejs_compat", "no_nodejs_compat_v2"], true, false],
  ["2024-01-01", ["nodejs_compat_v2"], false, true],
])("date %s with %j: nodejs_compat %s, v2 %s", (date, flags, nodejsCompat, nodejsCompatV2) => {
  expect(resolveNodejsCompat(date, flags)).toEqual({ nodejsCompat, nodejsCompatV2 });
});

test.each([
  // No fallback: the flags stay as written.
  ["2026-04-01", ["nodejs_compat"], "2026-04-01", ["nodejs_compat"]],
  ["2026-04-01", [], "2026-04-01", []],
  // A fallback below 2026-08-04 names what the config's date turned on.
  ["2026-10-06", ["global_fetch_strictly_public"], "2026-04-26", ["nodejs_compat", "global_fetch_strictly_public"]],
  ["2026-10-06", ["no_nodejs_compat"], "2026-04-26", ["nodejs_compat_v2", "no_nodejs_compat"]],
  ["2026-10-06", ["no_nodejs_compat", "no_nodejs_compat_v2"], "2026-04-26", ["no_nodejs_compat", "no_nodejs_compat_v2"]],
  ["2026-10-06", ["nodejs_compat"], "2026-04-26", ["nodejs_compat"]],
  // A workerd that knows 2026-08-04 refuses the flags that date made the default.
  ["2026-10-06", ["nodejs_compat", "nodejs_compat_v2", "x"], "2026-09-01", ["x"]],
])("date %s with %j, run on %s: %j", (date, flags, runDate, expected) => {
  expect(runtimeCompatibilityFlags(date, flags, runDate)).toEqual(expected);
});
