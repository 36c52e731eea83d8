import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { parseDotenv } from "../src/config/dotenv.ts";
import {
  loadDeployment,
  parseDeployment,
  type ConfigSource,
  type ParseOptions,
} from "../src/config/index.ts";
import { failure } from "./config-failure.ts";

const base = { main: "index.js", compatibility_date: "2024-03-18" };

function values(text: string): Record<string, string> {
  const parsed = parseDotenv(text);
  if (!parsed.ok) throw new Error(`expected no errors, got ${JSON.stringify(parsed.errors)}`);
  return Object.fromEntries(parsed.entries.map((e) => [e.name, e.value]));
}

function errors(text: string): { line: number; message: string }[] {
  const parsed = parseDotenv(text);
  if (parsed.ok) throw new Error("expected errors");
  return parsed.errors;
}


/** A reader over files in memory that records what was asked for. */
function memoryFiles(files: Record<string, string>): Required<Pick<ParseOptions, "readDevVarsFile">> & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    readDevVarsFile: (path) => {
      asked.push(path);
      return Object.hasOwn(files, path) ? files[path] : undefined;
    },
  };
}

function config(dir: string, extra: Record<string, unknown> = {}): ConfigSource {
  return { path: join(dir, "wrangler.json"), text: JSON.stringify({ ...base, name: dir, ...extra }) };
}

describe("the dotenv syntax, as wrangler reads it", () => {
  test.each([
    ["a plain entry", "KEY=value", { KEY: "value" }],
    ["blank and comment lines", "\n# a comment\n   \n  # indented comment\nKEY=v\n\n", { KEY: "v" }],
    ["an export prefix and indentation", "export A=1\n  export  B=2\n\tC=3", { A: "1", B: "2", C: "3" }],
    ["spaces around = and around an unquoted value", "KEY  =   spaced value  ", { KEY: "spaced value" }],
    ["an empty value", "A=\nB=  \nC= # only a comment", { A: "", B: "", C: "" }],
    ["an inline comment after a space", "KEY=value # the comment", { KEY: "value" }],
    // dotenv ends an unquoted value at any #, not only at " #": quote a value that has one.
    ["a # with no space before it still starts a comment", "KEY=abc#def", { KEY: "abc" }],
    ["= inside an unquoted value", "URL=postgres://u:p@h/db?x=1", { URL: "postgres://u:p@h/db?x=1" }],
    ["single quotes keep everything as written", String.raw`KEY='a # b \n "c"'`, { KEY: String.raw`a # b \n "c"` }],
    ["double quotes turn \\n and \\r into line breaks", String.raw`KEY="a\nb\rc # d"`, { KEY: "a\nb\rc # d" }],
    ["back quotes", "KEY=`it's \"quoted\"`", { KEY: `it's "quoted"` }],
    ["whitespace inside quotes is kept", `KEY="  padded  "  # comment`, { KEY: "  padded  " }],
    ["an empty quoted value", `A=""\nB=''`, { A: "", B: "" }],
    ["JSON in single quotes", `JSON='{"a":1,"b":[2]}'`, { JSON: `{"a":1,"b":[2]}` }],
    ["JSON in double quotes, inner quotes unescaped (dotenv strips the outer pair)", `JSON="{"a":"b"}"`, { JSON: `{"a":"b"}` }],
    ["\\\" inside double quotes stays as written", String.raw`KEY="say \"hi\""`, { KEY: String.raw`say \"hi\"` }],
    ["a backslash before the closing quote", String.raw`DIR="C:\dir\"`, { DIR: "C:\\dir\\" }],
    ["names with digits, dots and dashes", "a.b-c_1=x\n_9=y", { "a.b-c_1": "x", _9: "y" }],
    ["NAME: value, which dotenv also takes", "KEY: value", { KEY: "value" }],
    ["a name given twice keeps its last value", "KEY=first\nKEY=second", { KEY: "second" }],
    ["CRLF and CR line endings", "A=1\r\nB=\"x\\ny\"\r\nC=3\rD=4", { A: "1", B: "x\ny", C: "3", D: "4" }],
    ["a byte order mark", "\uFEFFKEY=v", { KEY: "v" }],
  ])("%s", (_, text, expected) => {
    expect(values(text)).toEqual(expected);
  });

  test("a quoted value may span lines, and later lines keep their numbers", () => {
    const text = ['A="line one', "line two", '"', "KEY='x", "y' # comment", "B=after"].join("\n");
    const parsed = parseDotenv(text);
    expect(parsed).toEqual({
      ok: true,
      entries: [
        { name: "A", value: "line one\nline two\n", line: 1 },
        { name: "KEY", value: "x\ny", line: 4 },
        { name: "B", value: "after", line: 6 },
      ],
    });
  });

  test("a line dotenv would skip is an error naming its line", () => {
    expect(errors("OK=1\nNOEQUALS\n\n=value\nMY KEY=1\n$X=1\nexport\n")).toEqual([
      { line: 2, message: 'expected NAME=value, but the line has no "="' },
      { line: 4, message: 'expected NAME=value, but there is no name before "="' },
      { line: 5, message: 'expected NAME=value, but the name before "=" is not made only of letters, digits, "_", "." and "-"' },
      { line: 6, message: 'expected NAME=value, but the name before "=" is not made only of letters, digits, "_", "." and "-"' },
      { line: 7, message: 'expected NAME=value, but the line has no "="' },
    ]);
  });

  test("a quote that never closes, or text after the closing quote, is an error", () => {
    const closing = "must end its line or be followed only by a # comment";
    expect(errors(`A=1\nB="unterminated\nC=3\nD='x' trailing\nE=\`x`)).toEqual([
      { line: 2, message: `the double-quoted value of B is not closed: the closing " ${closing}` },
      { line: 4, message: `the single-quoted value of D has text after its closing ': the closing ' ${closing}` },
      { line: 5, message: `the back-quoted value of E is not closed: the closing \` ${closing}` },
    ]);
    // A quote that closes on a later line says where, whether the value was meant to run on or not.
    // (The lines after the first are then read as lines of their own, and have their own errors.)
    expect(errors(`PEM="-----BEGIN\nabc\n-----END" x\nOK=1`)[0]).toEqual({
      line: 1,
      message: `the double-quoted value of PEM runs to a " on line 3 with text after it: the closing " ${closing}`,
    });
  });

  test("an error after a value spanning lines has the right line number", () => {
    expect(errors('A="one\ntwo\nthree"\nbroken')).toEqual([{ line: 4, message: 'expected NAME=value, but the line has no "="' }]);
  });

  test("no message ever contains a value or the text of a bad line", () => {
    const secret = "hunter2-s3cret";
    const text = [`A="${secret}`, `${secret}`, `B='${secret}' ${secret}`, `${secret} x=${secret}`, `=${secret}`].join("\n");
    const found = errors(text);
    expect(found).toHaveLength(5);
    for (const e of found) expect(e.message).not.toContain(secret);
  });
});

describe(".dev.vars and .env beside each config", () => {
  test(".dev.vars entries become string vars, over vars of the same name", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "GREETING=from dev vars\nAPI_TOKEN=t0ken\n" });
    const source = config("app", { vars: { GREETING: "from config", LIMIT: 3, NESTED: { a: 1 } } });
    const [worker] = parseDeployment([source], { fileExists: () => true, ...files }).workers;
    expect(worker?.vars).toEqual({ GREETING: "from dev vars", LIMIT: 3, NESTED: { a: 1 }, API_TOKEN: "t0ken" });
    expect(worker?.devVars).toEqual({
      paths: [join(process.cwd(), "app", ".dev.vars")],
      names: ["GREETING", "API_TOKEN"],
      leftOut: [],
      fromEnvironment: [],
    });
    expect(files.asked).toEqual([join("app", ".dev.vars")]);
  });

  test("without .dev.vars, .env is read; with both, .env is not even opened", () => {
    const files = memoryFiles({
      [join("both", ".dev.vars")]: "FROM=dev vars",
      [join("both", ".env")]: "FROM=env\nONLY_IN_ENV=1",
      [join("env-only", ".env")]: "FROM=env",
    });
    const sources = [config("both"), config("env-only"), config("none", { vars: { FROM: "config" } })];
    const workers = parseDeployment(sources, { fileExists: () => true, ...files }).workers;
    expect(workers.map((w) => [w.name, w.vars, w.devVars?.names])).toEqual([
      ["both", { FROM: "dev vars" }, ["FROM"]],
      ["env-only", { FROM: "env" }, ["FROM"]],
      ["none", { FROM: "config" }, undefined],
    ]);
    expect(workers[1]?.devVars?.paths).toEqual([join(process.cwd(), "env-only", ".env")]);
    expect(files.asked).toEqual([
      join("both", ".dev.vars"),
      join("env-only", ".dev.vars"),
      join("env-only", ".env"),
      join("env-only", ".env.local"),
      join("none", ".dev.vars"),
      join("none", ".env"),
      join("none", ".env.local"),
    ]);
  });

  test("without .dev.vars, .env.local is read after .env and wins for a name both set", () => {
    const files = memoryFiles({
      [join("app", ".env")]: "SHARED=from env\nBASE=1",
      [join("app", ".env.local")]: "SHARED=from env.local\nLOCAL=2",
      [join("local-only", ".env.local")]: "ONLY=local",
    });
    const workers = parseDeployment([config("app"), config("local-only")], { fileExists: () => true, ...files }).workers;
    expect(workers[0]?.vars).toEqual({ SHARED: "from env.local", BASE: "1", LOCAL: "2" });
    expect(workers[0]?.devVars?.paths).toEqual([join(process.cwd(), "app", ".env"), join(process.cwd(), "app", ".env.local")]);
    expect(workers[1]?.vars).toEqual({ ONLY: "local" });
  });

  test("a .env.local entry named like another binding is refused with the .env.local line", () => {
    const files = memoryFiles({ [join("app", ".env")]: "OK=1", [join("app", ".env.local")]: "\nKV=shadow" });
    const error = failure(() =>
      parseDeployment([config("app", { kv_namespaces: [{ binding: "KV", id: "k" }] })], { fileExists: () => true, ...files }),
    );
    expect(error.issues).toEqual([
      expect.objectContaining({ file: join("app", ".env.local"), message: expect.stringMatching(/^line 2: "KV" is also the name of kv_namespaces\[0\]\.binding .*a \.env\.local entry may replace a vars entry, not another binding$/) }),
    ]);
  });

  test("CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV=false reads .dev.vars only, as in wrangler", () => {
    const files = memoryFiles({ [join("dev", ".dev.vars")]: "FROM=dev vars", [join("env", ".env")]: "FROM=env" });
    const off = parseDeployment([config("dev"), config("env")], { fileExists: () => true, ...files, env: { CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "False" } });
    expect(off.workers.map((w) => w.vars)).toEqual([{ FROM: "dev vars" }, {}]);
    expect(files.asked).toEqual([join("dev", ".dev.vars"), join("env", ".dev.vars")]);
    const on = parseDeployment([config("env")], { fileExists: () => true, ...files, env: { CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "TRUE" } });
    expect(on.workers[0]?.vars).toEqual({ FROM: "env" });
  });

  test("CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV other than true or false is refused", () => {
    const error = failure(() => parseDeployment([config("app")], { fileExists: () => true, env: { CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "no" } }));
    expect(error.issues).toEqual([
      { file: "(environment)", path: "CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV", message: 'must be "true" or "false", got "no"' },
    ]);
  });

  test("parseDeployment without a reader reads no dev vars", () => {
    const [worker] = parseDeployment([config("app", { vars: { A: "1" } })], { fileExists: () => true }).workers;
    expect(worker?.vars).toEqual({ A: "1" });
    expect(worker?.devVars).toBeUndefined();
  });

  test("a name like __proto__ is an ordinary entry", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "__proto__=x" });
    const [worker] = parseDeployment([config("app")], { fileExists: () => true, ...files }).workers;
    expect(Object.hasOwn(worker!.vars, "__proto__")).toBe(true);
    expect(Object.getPrototypeOf(worker!.vars)).toBe(Object.prototype);
  });

  test("a malformed line fails the deployment, naming the file and the line, next to its config's errors", () => {
    const files = memoryFiles({
      [join("a", ".dev.vars")]: "OK=1\n\nnot an assignment\nB='open",
      [join("b", ".env")]: "C=\"x\" y",
    });
    const error = failure(() =>
      parseDeployment([config("a", { compatibility_date: "soon" }), config("b")], { fileExists: () => true, ...files }),
    );
    const dotA = join("a", ".dev.vars");
    expect(error.issues.map((i) => [i.file, i.path, i.message])).toEqual([
      [join("a", "wrangler.json"), "compatibility_date", 'must be a date written "YYYY-MM-DD", got "soon"'],
      [dotA, "", 'line 3: expected NAME=value, but the line has no "="'],
      [dotA, "", "line 4: the single-quoted value of B is not closed: the closing ' must end its line or be followed only by a # comment"],
      [join("b", ".env"), "", 'line 1: the double-quoted value of C has text after its closing ": the closing " must end its line or be followed only by a # comment'],
    ]);
    expect(error.message).toContain(`${dotA}: line 3: expected NAME=value`);
  });

  test("two configs in one directory share its .dev.vars, and its errors are reported once", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "SHARED=1\nbroken" });
    const sources = [
      { path: join("app", "a.json"), text: JSON.stringify({ ...base, name: "a" }) },
      { path: join("app", "b.json"), text: JSON.stringify({ ...base, name: "b" }) },
    ];
    expect(failure(() => parseDeployment(sources, { fileExists: () => true, ...files })).issues).toEqual([
      { file: join("app", ".dev.vars"), path: "", message: 'line 2: expected NAME=value, but the line has no "="' },
    ]);
    const ok = memoryFiles({ [join("app", ".dev.vars")]: "SHARED=1" });
    const workers = parseDeployment(sources, { fileExists: () => true, ...ok }).workers;
    expect(workers.map((w) => w.vars)).toEqual([{ SHARED: "1" }, { SHARED: "1" }]);
  });

  test("an unreadable file fails the deployment and does not fall back to .env", () => {
    const denied = Object.assign(new Error(`EACCES: permission denied, open '${join("app", ".dev.vars")}'`), { code: "EACCES" });
    const asked: string[] = [];
    const readDevVarsFile = (path: string): string | undefined => {
      asked.push(path);
      if (path.endsWith(".dev.vars")) throw denied;
      return "FROM=env";
    };
    const error = failure(() => parseDeployment([config("app")], { fileExists: () => true, readDevVarsFile }));
    expect(error.issues).toEqual([
      {
        file: join("app", ".dev.vars"),
        path: "",
        message: `cannot read the file: EACCES: permission denied, open '${join("app", ".dev.vars")}'`,
      },
    ]);
    expect(asked).toEqual([join("app", ".dev.vars")]);
  });

  test("a dev var may replace a vars entry but not another binding", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "GREETING=hi\nCACHE=oops\n\nJOBS=oops" });
    const source = config("app", {
      vars: { GREETING: "hello" },
      kv_namespaces: [{ binding: "CACHE", id: "kv" }],
      queues: { producers: [{ binding: "JOBS", queue: "jobs" }] },
    });
    const why = "a .dev.vars entry may replace a vars entry, not another binding";
    const configFile = join("app", "wrangler.json");
    expect(failure(() => parseDeployment([source], { fileExists: () => true, ...files })).issues).toEqual([
      {
        file: join("app", ".dev.vars"),
        path: "",
        message: `line 4: "JOBS" is also the name of queues.producers[0].binding in ${configFile}; ${why}`,
      },
      {
        file: join("app", ".dev.vars"),
        path: "",
        message: `line 2: "CACHE" is also the name of kv_namespaces[0].binding in ${configFile}; ${why}`,
      },
    ]);
  });
});

describe("${NAME} references in .env files, expanded as wrangler expands them", () => {
  function envVars(files: Record<string, string>): Record<string, unknown> {
    const reader = memoryFiles(Object.fromEntries(Object.entries(files).map(([name, text]) => [join("app", name), text])));
    const [worker] = parseDeployment([config("app")], { fileExists: () => true, ...reader }).workers;
    return worker!.vars;
  }

  test("braced and bare references, defaults, escapes, and across .env and .env.local", () => {
    const env = [
      "HOST=db.local",
      "URL=postgres://${HOST}:5432/app",
      "BARE=$HOST/x",
      "FALLBACK=${UNSET:-plain}",
      "ONLY_IF_SET=${HOST:+yes}",
      String.raw`PRICE=\$5`,
      "TOO_EARLY=${LATER}",
      "LATER=set",
    ].join("\n");
    expect(envVars({ ".env": env, ".env.local": "LOCAL_URL=${URL}?local=1" })).toEqual({
      HOST: "db.local",
      URL: "postgres://db.local:5432/app",
      BARE: "db.local/x",
      FALLBACK: "plain",
      ONLY_IF_SET: "yes",
      PRICE: "$5",
      // dotenv-expand, and so wrangler, sees only the names set before a value.
      TOO_EARLY: "",
      LATER: "set",
      LOCAL_URL: "postgres://db.local:5432/app?local=1",
    });
  });

  test("the process environment is not read", () => {
    const name = "CELLD_TEST_EXPANSION_SOURCE";
    process.env[name] = "from the process";
    try {
      expect(envVars({ ".env": `A=\${${name}:-not from the process}` })).toEqual({ A: "not from the process" });
    } finally {
      delete process.env[name];
    }
  });

  test(".dev.vars is taken as written, as in wrangler", () => {
    expect(envVars({ ".dev.vars": "HOST=x\nURL=${HOST}/y" })).toEqual({ HOST: "x", URL: "${HOST}/y" });
  });

  test("an entry named __proto__ is still an ordinary entry", () => {
    const vars = envVars({ ".env": "__proto__=p\nA=${B:-b}" });
    expect(Object.hasOwn(vars, "__proto__")).toBe(true);
    expect({ ...vars }).toEqual(Object.fromEntries([["__proto__", "p"], ["A", "b"]]));
  });

  test("a reference to a name every object has is refused by line, without the value (wrangler hangs on it)", () => {
    const reader = memoryFiles({ [join("app", ".env")]: "OK=1\nLOOPS=a${constructor}\nCRASHES=$toString\nESCAPED=\\$constructor" });
    const error = failure(() => parseDeployment([config("app")], { fileExists: () => true, ...reader }));
    expect(error.issues.map((i) => [i.file, i.message.slice(0, i.message.indexOf(" refers"))])).toEqual([
      [join("app", ".env"), "line 2: the value of LOOPS"],
      [join("app", ".env"), "line 3: the value of CRASHES"],
    ]);
    expect(error.issues[0]?.message).toMatch(/Rename that variable, or write \\\$ for a literal \$$/);
    expect(error.message).not.toContain("a${constructor}");
  });
});

describe("secrets.required: only the listed names come from the files", () => {
  const secrets = (required: unknown) => ({ secrets: required === undefined ? {} : { required } });

  test("listed names are taken, the rest left out, and vars stay", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "API_KEY=k\nDEBUG=1\nGREETING=from file\nDB_PASSWORD=p" });
    const source = config("app", { vars: { GREETING: "from config" }, ...secrets(["API_KEY", "DB_PASSWORD"]) });
    const deployment = parseDeployment([source], { fileExists: () => true, ...files });
    expect(deployment.workers[0]?.vars).toEqual({ GREETING: "from config", API_KEY: "k", DB_PASSWORD: "p" });
    expect(deployment.workers[0]?.devVars).toEqual({
      paths: [join(process.cwd(), "app", ".dev.vars")],
      names: ["API_KEY", "DB_PASSWORD"],
      leftOut: ["DEBUG", "GREETING"],
      fromEnvironment: [],
    });
    expect(deployment.warnings).toEqual([]);
  });

  test("a listed name no file sets is a warning naming it; the deployment still starts", () => {
    const files = memoryFiles({ [join("app", ".env")]: "API_KEY=k", [join("app", ".env.local")]: "OTHER=1" });
    const withFiles = parseDeployment([config("app", secrets(["API_KEY", "DB_PASSWORD", "SIGNING_KEY"]))], {
      fileExists: () => true,
      ...files,
    });
    expect(withFiles.workers[0]?.vars).toEqual({ API_KEY: "k" });
    expect(withFiles.warnings).toEqual([
      {
        file: join("app", "wrangler.json"),
        path: "secrets.required",
        message: "DB_PASSWORD, SIGNING_KEY: they are not set in .env or .env.local, so the Worker's env will not have them",
      },
    ]);
    const noFiles = parseDeployment([config("bare", secrets(["API_KEY"]))], { fileExists: () => true, ...memoryFiles({}) });
    expect(noFiles.warnings.map((w) => w.message)).toEqual([
      "API_KEY: there is no .dev.vars or .env file beside the config, so the Worker's env will not have it",
    ]);
  });

  test("a secrets table without required takes nothing from the files", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "A=1" });
    const deployment = parseDeployment([config("app", secrets(undefined))], { fileExists: () => true, ...files });
    expect(deployment.workers[0]?.vars).toEqual({});
    expect(deployment.workers[0]?.devVars?.leftOut).toEqual(["A"]);
    expect(deployment.warnings).toEqual([]);
  });

  test("a left-out entry named like another binding is not refused: it is not loaded", () => {
    const files = memoryFiles({ [join("app", ".dev.vars")]: "API_KEY=k\nJOBS=not loaded" });
    const source = config("app", { queues: { producers: [{ binding: "JOBS", queue: "jobs" }] }, ...secrets(["API_KEY"]) });
    expect(parseDeployment([source], { fileExists: () => true, ...files }).workers[0]?.vars).toEqual({ API_KEY: "k" });
  });

  test.each([
    ["a string", { required: "API_KEY" }, "secrets.required", 'must be an array, got "API_KEY"'],
    ["a number in the list", { required: ["A", 7] }, "secrets.required[1]", "must be a string, got 7"],
    ["an empty name", { required: [""] }, "secrets.required[0]", "must not be empty"],
    ["not a table", "API_KEY", "secrets", 'must be an object (TOML table), got "API_KEY"'],
  ])("secrets as %s is refused, naming the key", (_, value, path, message) => {
    const error = failure(() => parseDeployment([config("app", { secrets: value })], { fileExists: () => true }));
    expect(error.issues).toEqual([{ file: join("app", "wrangler.json"), path, message }]);
  });

  test("an unknown key under secrets is warned about", () => {
    const deployment = parseDeployment([config("app", { secrets: { required: [], optional: ["X"] } })], { fileExists: () => true });
    expect(deployment.warnings).toEqual([
      { file: join("app", "wrangler.json"), path: "secrets.optional", message: "is not a key celld knows, so it has no effect" },
    ]);
  });
});

describe("CLOUDFLARE_INCLUDE_PROCESS_ENV=true: the environment's variables join the .env files'", () => {
  const include = { CLOUDFLARE_INCLUDE_PROCESS_ENV: "true" };

  test("every variable is taken, an environment value wins over a file's, and .env may refer to them", () => {
    const files = memoryFiles({ [join("app", ".env")]: "URL=${HOST}/x\nAPI_KEY=from file\nONLY_FILE=1" });
    const env = { ...include, HOST: "h.local", API_KEY: "from env" };
    const [worker] = parseDeployment([config("app")], { fileExists: () => true, ...files, env }).workers;
    expect(worker?.vars).toEqual({ ...env, URL: "h.local/x", ONLY_FILE: "1" });
    expect(worker?.devVars).toMatchObject({
      paths: [join(process.cwd(), "app", ".env")],
      fromEnvironment: ["CLOUDFLARE_INCLUDE_PROCESS_ENV", "HOST", "API_KEY"],
    });
  });

  test("an empty environment value does not win over a file's, as in dotenv-expand", () => {
    const files = memoryFiles({ [join("app", ".env")]: "TOKEN=from file" });
    const env = { ...include, TOKEN: "" };
    const [worker] = parseDeployment([config("app")], { fileExists: () => true, ...files, env }).workers;
    expect(worker?.vars).toEqual({ ...include, TOKEN: "from file" });
    expect(worker?.devVars?.fromEnvironment).toEqual(["CLOUDFLARE_INCLUDE_PROCESS_ENV"]);
  });

  test("without any .env file the environment alone is taken; with .dev.vars, or .env switched off, it is not", () => {
    const files = memoryFiles({ [join("dev", ".dev.vars")]: "A=1" });
    const env = { ...include, TOKEN: "t" };
    const [bare, dev] = parseDeployment([config("bare"), config("dev")], { fileExists: () => true, ...files, env }).workers;
    expect(bare?.vars).toEqual(env);
    expect(bare?.devVars).toMatchObject({ paths: [], fromEnvironment: ["CLOUDFLARE_INCLUDE_PROCESS_ENV", "TOKEN"] });
    expect(dev?.vars).toEqual({ A: "1" });
    const off = parseDeployment([config("bare")], {
      fileExists: () => true,
      env: { ...env, CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "false" },
    });
    expect(off.workers[0]?.vars).toEqual({});
  });

  test("with secrets.required, only the listed names; the environment's others are not reported as left out", () => {
    const files = memoryFiles({ [join("app", ".env")]: "DEBUG=1" });
    const source = config("app", { secrets: { required: ["API_KEY", "DB_PASSWORD"] } });
    const env = { ...include, API_KEY: "k", PATH: "/usr/bin", HOME: "/root" };
    const deployment = parseDeployment([source], { fileExists: () => true, ...files, env });
    expect(deployment.workers[0]?.vars).toEqual({ API_KEY: "k" });
    expect(deployment.workers[0]?.devVars).toMatchObject({ leftOut: ["DEBUG"], fromEnvironment: ["API_KEY"] });
    expect(deployment.warnings.map((w) => w.message)).toEqual([
      "DB_PASSWORD: it is not set in .env or the environment, so the Worker's env will not have it",
    ]);
  });

  test("a variable named like another binding is left out with a warning; one named like a vars entry replaces it", () => {
    const source = config("app", {
      vars: { MODE: "config" },
      queues: { producers: [{ binding: "JOBS", queue: "jobs" }] },
    });
    const env = { ...include, JOBS: "not a queue", MODE: "environment" };
    const deployment = parseDeployment([source], { fileExists: () => true, env });
    expect(deployment.workers[0]?.vars).toEqual({ MODE: "environment", CLOUDFLARE_INCLUDE_PROCESS_ENV: "true" });
    expect(deployment.warnings).toEqual([
      {
        file: join("app", "wrangler.json"),
        path: "queues.producers[0].binding",
        message: "the environment variable JOBS is left out of the Worker's env: this binding already has that name",
      },
    ]);
  });

  test("either setting other than true or false is refused, both at once", () => {
    const env = { CLOUDFLARE_INCLUDE_PROCESS_ENV: "1", CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "yes" };
    const error = failure(() => parseDeployment([config("app")], { fileExists: () => true, env }));
    expect(error.issues.map((i) => [i.file, i.path, i.message])).toEqual([
      ["(environment)", "CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV", 'must be "true" or "false", got "yes"'],
      ["(environment)", "CLOUDFLARE_INCLUDE_PROCESS_ENV", 'must be "true" or "false", got "1"'],
    ]);
  });
});

describe("loadDeployment reads the files on disk", () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  function projectDir(files: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), "celld-dev-vars-"));
    dirs.push(dir);
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    return dir;
  }

  const toml = `name = "app"\nmain = "index.js"\ncompatibility_date = "2024-03-18"\n[vars]\nGREETING = "from toml"\n`;

  test(".dev.vars beside wrangler.toml is read, and .env beside it is not", () => {
    const dir = projectDir({
      "wrangler.toml": toml,
      "index.js": "export default {};",
      ".dev.vars": 'GREETING="from dev vars"\nexport TOKEN=abc # comment\n',
      ".env": "GREETING=from env\nOTHER=1\n",
    });
    const [worker] = loadDeployment([join(dir, "wrangler.toml")]).workers;
    expect(worker?.vars).toEqual({ GREETING: "from dev vars", TOKEN: "abc" });
    expect(worker?.devVars).toEqual({ paths: [join(dir, ".dev.vars")], names: ["GREETING", "TOKEN"], leftOut: [], fromEnvironment: [] });
  });

  test("[secrets] required in wrangler.toml picks from .dev.vars", () => {
    const dir = projectDir({
      "wrangler.toml": `${toml}[secrets]\nrequired = ["TOKEN"]\n`,
      "index.js": "export default {};",
      ".dev.vars": "TOKEN=abc\nGREETING=left out\n",
    });
    const [worker] = loadDeployment([join(dir, "wrangler.toml")]).workers;
    expect(worker?.vars).toEqual({ GREETING: "from toml", TOKEN: "abc" });
    expect(worker?.devVars?.leftOut).toEqual(["GREETING"]);
  });

  test(".env is read when there is no .dev.vars", () => {
    const dir = projectDir({ "wrangler.toml": toml, "index.js": "export default {};", ".env": "GREETING=from env\n" });
    const [worker] = loadDeployment([join(dir, "wrangler.toml")]).workers;
    expect(worker?.vars).toEqual({ GREETING: "from env" });
    expect(worker?.devVars?.paths).toEqual([join(dir, ".env")]);
  });

  test("loadDeployment takes CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV from the process environment", () => {
    const dir = projectDir({ "wrangler.toml": toml, "index.js": "export default {};", ".env": "GREETING=from env\n" });
    process.env["CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV"] = "false";
    try {
      expect(loadDeployment([join(dir, "wrangler.toml")]).workers[0]?.vars).toEqual({ GREETING: "from toml" });
    } finally {
      delete process.env["CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV"];
    }
    expect(loadDeployment([join(dir, "wrangler.toml")]).workers[0]?.vars).toEqual({ GREETING: "from env" });
  });

  test("loadDeployment takes CLOUDFLARE_INCLUDE_PROCESS_ENV and the variables from the process environment", () => {
    const dir = projectDir({ "wrangler.toml": `${toml}[secrets]\nrequired = ["CELLD_TEST_SECRET"]\n`, "index.js": "export default {};" });
    process.env["CLOUDFLARE_INCLUDE_PROCESS_ENV"] = "true";
    process.env["CELLD_TEST_SECRET"] = "from the process";
    try {
      expect(loadDeployment([join(dir, "wrangler.toml")]).workers[0]?.vars).toEqual({
        GREETING: "from toml",
        CELLD_TEST_SECRET: "from the process",
      });
    } finally {
      delete process.env["CLOUDFLARE_INCLUDE_PROCESS_ENV"];
      delete process.env["CELLD_TEST_SECRET"];
    }
    expect(loadDeployment([join(dir, "wrangler.toml")]).workers[0]?.vars).toEqual({ GREETING: "from toml" });
  });

  test("a .dev.vars that cannot be read (here a directory) fails the deployment", () => {
    const dir = projectDir({ "wrangler.toml": toml, "index.js": "export default {};", ".env": "GREETING=x\n" });
    mkdirSync(join(dir, ".dev.vars"));
    const error = failure(() => loadDeployment([join(dir, "wrangler.toml")]));
    expect(error.issues).toHaveLength(1);
    expect(error.issues[0]).toMatchObject({ file: join(dir, ".dev.vars"), path: "" });
    expect(error.issues[0]?.message).toMatch(/^cannot read the file: EISDIR/);
  });

  test("a malformed .dev.vars names the file and the line, and never a value", () => {
    const secret = "sk_live_do_not_print";
    const dir = projectDir({
      "wrangler.toml": toml,
      "index.js": "export default {};",
      ".dev.vars": `GOOD=${secret}\n${secret}\nBAD="${secret}\n`,
    });
    const error = failure(() => loadDeployment([join(dir, "wrangler.toml")]));
    expect(error.issues.map((i) => i.message)).toEqual([
      'line 2: expected NAME=value, but the line has no "="',
      'line 3: the double-quoted value of BAD is not closed: the closing " must end its line or be followed only by a # comment',
    ]);
    expect(error.message).toContain(`${join(dir, ".dev.vars")}: line 2: `);
    expect(error.message).not.toContain(secret);
  });
});
