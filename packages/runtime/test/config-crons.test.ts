import { expect, test } from "vitest";
import { parseDeployment } from "../src/config/index.ts";
import { issuesOf, parseOne } from "./config-failure.ts";

test("triggers.crons reach the Worker's config as written, each once; one listed again is pointed out", () => {
  const deployment = parseOne({ triggers: { crons: ["*/5 * * * *", "0 18 * * FRIL", "*/5 * * * *"] } });
  expect(deployment.workers[0]!.crons).toEqual(["*/5 * * * *", "0 18 * * FRIL"]);
  expect(deployment.warnings.map((w) => `${w.path}: ${w.message}`)).toEqual([
    'triggers.crons[2]: repeats triggers.crons[0] ("*/5 * * * *"); it runs once at each of its times',
  ]);
  expect(parseOne({ triggers: { crons: ["*/5 * * * *", "0 18 * * FRIL"] } }).warnings).toEqual([]);
  expect(parseOne({}).workers[0]!.crons).toEqual([]);
  expect(parseOne({ triggers: {} }).workers[0]!.crons).toEqual([]);
});

test("an expression Cloudflare would refuse is refused at its own index, with the value and the bound", () => {
  const lines = issuesOf({ triggers: { crons: ["0 * * * *", "61 * * * *", "* * * *"] } });
  expect(lines).toHaveLength(2);
  expect(lines[0]).toMatch(/^triggers\.crons\[1\]: .*61.*0-59/);
  expect(lines[1]).toMatch(/^triggers\.crons\[2\]: .*4 fields.*5/);
});

test("triggers and crons of the wrong type are refused, showing the value", () => {
  expect(issuesOf({ triggers: { crons: "*/5 * * * *" } })).toEqual(['triggers.crons: must be an array, got "*/5 * * * *"']);
  expect(issuesOf({ triggers: { crons: [5] } })).toEqual(['triggers.crons[0]: must be a string such as "*/5 * * * *", got 5']);
  expect(issuesOf({ triggers: ["*/5 * * * *"] })).toEqual([
    'triggers: must be an object (TOML table), got an array',
  ]);
});

test("a key beside crons is warned about, and an environment inherits the top level's crons as wrangler does", () => {
  expect(parseOne({ triggers: { crons: [], cron: ["* * * * *"] } }).warnings.map((w) => `${w.path}: ${w.message}`)).toEqual([
    'triggers.cron: is not a key celld knows, so it has no effect (did you mean "crons"?)',
  ]);
  const text = JSON.stringify({
    name: "w",
    main: "index.js",
    compatibility_date: "2026-04-01",
    triggers: { crons: ["0 * * * *"] },
    env: { staging: {}, production: { triggers: { crons: ["30 * * * *"] } } },
  });
  const load = (environment: string) =>
    parseDeployment([{ path: "w.json", text }], { fileExists: () => true, environment }).workers[0]!.crons;
  expect(load("staging")).toEqual(["0 * * * *"]);
  expect(load("production")).toEqual(["30 * * * *"]);
});
