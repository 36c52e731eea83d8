import { describe, expect, test } from "vitest";
import { formatWarnings, parseDeployment, type ParseOptions } from "../src/config/index.ts";
import { failure } from "./config-failure.ts";

const everyFileExists: ParseOptions = { fileExists: () => true };

function parse(config: Record<string, unknown>) {
  const text = JSON.stringify({ name: "w", main: "index.js", compatibility_date: "2026-04-01", ...config });
  return parseDeployment([{ path: "w.json", text }], everyFileExists);
}

const issuesOf = (config: Record<string, unknown>) =>
  failure(() => parse(config)).issues.map((i) => `${i.path}: ${i.message}`);

describe("define and alias, as wrangler hands them to esbuild", () => {
  test("are read into the model, with no warning", () => {
    const deployment = parse({ define: { "process.env.MODE": '"dev"', DEBUG: "false" }, alias: { lib: "./shim.js" } });
    expect(deployment.workers[0]).toMatchObject({ define: { "process.env.MODE": '"dev"', DEBUG: "false" }, alias: { lib: "./shim.js" } });
    expect(deployment.warnings).toEqual([]);
    expect(parse({}).workers[0]).toMatchObject({ define: {}, alias: {} });
  });

  test("a define esbuild would refuse is refused at load, by key, saying why", () => {
    expect(issuesOf({ define: { VERSION: "1.0 beta", "a b": "1", OK: "1.0" } })).toEqual([
      `define.VERSION: the value must be an identifier, a dotted name or a JS literal, got "1.0 beta"; a string keeps its quotes, as '"text"' ` +
        "(esbuild: Invalid define value (must be an entity name or JS literal): 1.0 beta)",
      'define["a b"]: the name must be an identifier or a dotted name such as process.env.MODE (esbuild: Expected "." but found "b")',
    ]);
    // esbuild is asked once every value is a string.
    expect(issuesOf({ define: { N: 1, "a b": "1" }, alias: { lib: "", x: 2 } })).toEqual([
      "define.N: must be a string, got 1",
      "alias.lib: must not be empty",
      "alias.x: must be a string, got 2",
    ]);
    expect(issuesOf({ define: ["X"] })).toEqual(["define: must be an object (TOML table), got an array"]);
  });

  test("what is left of the bundling keys still warns", () => {
    expect(formatWarnings(parse({ minify: true }).warnings)).toEqual([
      "w.json: minify: is a wrangler bundling key celld ignores: celld bundles `main` itself",
    ]);
  });
});
