import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { UsageError, findConfig, parseDevArgs, parseKeysArgs, usage } from "../src/cli/args.ts";

/** A directory with a wrangler.toml in it, so that only the arguments can be wrong. */
function projectDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-args-"));
  writeFileSync(join(dir, "wrangler.toml"), 'name = "w"\nmain = "index.js"\n');
  return dir;
}

function refusal(parse: () => unknown): string {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error("the arguments were accepted");
}

describe("celld's argument refusals say what to type instead", () => {
  const cwd = projectDir();
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  test("a misspelt option names the one it was probably meant to be", () => {
    expect(refusal(() => parseDevArgs(["--prot", "9000"], cwd))).toBe("unknown option --prot (did you mean --port?)");
    expect(refusal(() => parseDevArgs(["--api_port", "9000"], cwd))).toBe("unknown option --api_port (did you mean --api-port?)");
    expect(refusal(() => parseDevArgs(["--verbose"], cwd))).toBe("unknown option --verbose");
    expect(refusal(() => parseKeysArgs(["list", "--al"], cwd))).toBe("unknown option --al (did you mean --all?)");
    expect(refusal(() => parseKeysArgs(["lst"], cwd))).toBe('celld keys takes create, list or revoke, got "lst" (did you mean "list"?)');
    expect(refusal(() => parseKeysArgs(["show"], cwd))).toBe('celld keys takes create, list or revoke, got "show"');
  });

  test("a config file given without -c is pointed at -c; other arguments are named", () => {
    expect(refusal(() => parseDevArgs(["wrangler.toml"], cwd))).toBe(
      'unexpected argument "wrangler.toml"; to use it as the config, pass -c wrangler.toml',
    );
    expect(refusal(() => parseDevArgs(["app/wrangler.jsonc"], cwd))).toBe(
      'unexpected argument "app/wrangler.jsonc"; to use it as the config, pass -c app/wrangler.jsonc',
    );
    expect(refusal(() => parseDevArgs(["src/index.ts"], cwd))).toBe('unexpected argument "src/index.ts"');
  });

  test("the same config file given twice is named, not reported as two Workers with one name", () => {
    expect(refusal(() => parseDevArgs(["-c", "wrangler.toml", "-c", "./wrangler.toml"], cwd))).toBe(
      '-c ./wrangler.toml names the same file as -c wrangler.toml; each config file is one Worker, so give it once',
    );
  });

  test("an option given twice with two values is refused, where the last would have won unseen", () => {
    expect(refusal(() => parseDevArgs(["--env", "staging", "--port", "0", "-e", "production"], cwd))).toBe(
      '-e/--env given twice ("staging", then "production"); give it once',
    );
    expect(refusal(() => parseDevArgs(["--port", "8787", "--port=9000"], cwd))).toBe('--port given twice ("8787", then "9000"); give it once');
    expect(refusal(() => parseKeysArgs(["list", "--data", "a", "--data", "b"], cwd))).toBe('--data given twice ("a", then "b"); give it once');
    // The same value twice says one thing; several -c and --scope are meant.
    expect(parseDevArgs(["-c", "wrangler.toml", "--port", "0", "--port", "0"], cwd).port).toBe(0);
    expect(parseDevArgs(["-c", "a.toml", "-c", "b.toml", "-e", "x", "--env", "x"], cwd).environment).toBe("x");
  });

  test("an option without its value says so", () => {
    expect(refusal(() => parseDevArgs(["--port"], cwd))).toBe("--port needs a value");
    expect(refusal(() => parseDevArgs(["-c"], cwd))).toBe("-c/--config needs a value");
    expect(refusal(() => parseDevArgs(["--config"], cwd))).toBe("-c/--config needs a value");
    expect(refusal(() => parseKeysArgs(["create", "--org"], cwd))).toBe("--org needs a value");
  });

  test("celld keys create refuses a malformed environment segment or an unknown scope by its flag, before the key store is opened", () => {
    const create = (...flags: string[]) => ["create", "--org", "acme", "--project", "shop", "--env", "prod", "--scope", "events:read", ...flags];
    expect(refusal(() => parseKeysArgs(["create", "--org", "a b", "--project", "shop", "--env", "prod", "--scope", "events:read"], cwd))).toBe(
      '--org must be 1 to 63 characters: letters, digits, "-" and "_", starting with a letter or digit, got "a b"',
    );
    expect(refusal(() => parseKeysArgs(["create", "--org", "acme", "--project", "shop", "--env", "_prod", "--scope", "events:read"], cwd))).toMatch(
      /^--env must be 1 to 63 characters: .*, got "_prod"$/,
    );
    expect(refusal(() => parseKeysArgs(create("--scope", "events:reed"), cwd))).toBe(
      '--scope: unknown scope "events:reed"; scopes are events:publish, events:write, events:read, metrics:read, workers:write, workers:read',
    );
    expect(parseKeysArgs(create("--scope", "events:write"), cwd).scopes).toEqual(["events:read", "events:write"]);
  });

  test("a port out of range names the flag and the bound", () => {
    expect(refusal(() => parseDevArgs(["--port", "70000"], cwd))).toBe('--port must be a port number from 0 to 65535, got "70000"');
    // A negative value is a value, not the next option.
    expect(refusal(() => parseDevArgs(["--port", "-1"], cwd))).toBe('--port must be a port number from 0 to 65535, got "-1"');
    expect(refusal(() => parseDevArgs(["--api-port", "-8"], cwd))).toBe('--api-port must be a port number from 0 to 65535, got "-8"');
    expect(refusal(() => parseDevArgs(["--port", "8790", "--api-port", "8790"], cwd))).toBe(
      "--api-port must differ from --port (both 8790): the Workers and the queues API each need a port of their own",
    );
    expect(parseDevArgs(["--port", "0", "--api-port", "0"], cwd).apiPort).toBe(0);
    // The API speaks plain HTTP: --host 0.0.0.0 exposes the Workers, not it.
    expect(parseDevArgs(["--host", "0.0.0.0", "--api-port", "0"], cwd)).toMatchObject({ host: "0.0.0.0", apiHost: "127.0.0.1" });
    expect(parseDevArgs(["--api-port", "0", "--api-host", "10.0.0.5"], cwd)).toMatchObject({ host: "127.0.0.1", apiHost: "10.0.0.5" });
  });
});

describe("with no -c, the config is found as wrangler finds it", () => {
  const roots: string[] = [];
  afterAll(() => roots.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  /** A fresh directory with these (empty) files in it, subdirectories made as needed. */
  function tree(...files: string[]): string {
    const root = mkdtempSync(join(tmpdir(), "celld-find-"));
    roots.push(root);
    for (const file of files) {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), "");
    }
    return root;
  }

  test("in one directory, wrangler.json comes before wrangler.jsonc, and both before wrangler.toml; the others are named", () => {
    const root = tree("wrangler.toml", "wrangler.jsonc", "wrangler.json");
    const args = parseDevArgs([], root);
    expect(args.configs).toEqual(["wrangler.json"]);
    expect(args.dataDir).toBe(join(root, ".celld"));
    expect(args.warnings).toEqual([
      `${root} has wrangler.json, wrangler.jsonc, wrangler.toml: using wrangler.json and ignoring wrangler.jsonc, wrangler.toml, ` +
        "as wrangler would (it prefers wrangler.json, then wrangler.jsonc, then wrangler.toml); pass -c to choose",
    ]);
    const jsoncAndToml = tree("wrangler.toml", "wrangler.jsonc");
    expect(parseDevArgs([], jsoncAndToml).configs).toEqual(["wrangler.jsonc"]);
    expect(parseDevArgs([], tree("wrangler.toml")).warnings).toEqual([]);
  });

  test("from a subdirectory, the nearest parent with a config is used, and the data directory sits beside it", () => {
    const root = tree("app/wrangler.toml", "app/src/handlers/index.ts");
    const args = parseDevArgs(["--port", "0"], join(root, "app", "src", "handlers"));
    expect(args.configs).toEqual([join("..", "..", "wrangler.toml")]);
    expect(args.dataDir).toBe(join(root, "app", ".celld"));
    expect(parseKeysArgs(["list"], join(root, "app", "src")).dataDir).toBe(join(root, "app", ".celld"));
  });

  test("the nearest directory wins over a preferred name further up (wrangler would take the parent's wrangler.json)", () => {
    const root = tree("wrangler.json", "app/wrangler.toml");
    expect(parseDevArgs([], join(root, "app")).configs).toEqual(["wrangler.toml"]);
  });

  test("a directory named like a config is not one", () => {
    const root = tree("wrangler.json/keep", "wrangler.toml");
    expect(parseDevArgs([], root).configs).toEqual(["wrangler.toml"]);
  });

  test("-c is taken as given, with nothing searched", () => {
    const root = tree("wrangler.json", "wrangler.toml");
    const args = parseDevArgs(["-c", "wrangler.toml"], root);
    expect(args.configs).toEqual(["wrangler.toml"]);
    expect(args.warnings).toEqual([]);
  });

  test("when no directory up to the root has one, nothing is found, and the root was the last place looked", () => {
    const root = tree("src/index.ts");
    const looked: string[] = [];
    // Only the names are looked at here: a real /tmp or / may hold a stray config.
    expect(findConfig(join(root, "src"), (path) => (looked.push(path), false))).toBeUndefined();
    expect(looked.slice(0, 3)).toEqual(["wrangler.json", "wrangler.jsonc", "wrangler.toml"].map((n) => join(root, "src", n)));
    expect(looked.at(-1)).toBe(join("/", "wrangler.toml"));
  });
});

describe("celld keys with -c and --data: as celld dev takes them", () => {
  const cwd = projectDir();
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  test("both: --data names the directory, as for celld dev given the same two", () => {
    const data = join(cwd, "elsewhere");
    expect(parseKeysArgs(["list", "-c", "wrangler.toml", "--data", data], cwd).dataDir).toBe(data);
    expect(parseDevArgs(["-c", "wrangler.toml", "--data", data], cwd).dataDir).toBe(data);
  });

  test("a -c that names no file is refused, with --data or without, as celld dev would refuse it", () => {
    // Without --data, the keys would go to a .celld beside a file no celld dev reads.
    expect(refusal(() => parseKeysArgs(["list", "-c", join("typo", "wrangler.toml")], cwd))).toBe(
      `-c ${join("typo", "wrangler.toml")}: config file not found (looked for ${join(cwd, "typo", "wrangler.toml")})`,
    );
    expect(refusal(() => parseKeysArgs(["list", "-c", "wrangler.tmol", "--data", join(cwd, "d")], cwd))).toBe(
      `-c wrangler.tmol: config file not found (looked for ${join(cwd, "wrangler.tmol")})`,
    );
  });
});

describe("celld keys' usage lines", () => {
  const cwd = projectDir();
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  // Each action's line shows both ways to name the data directory, and the one it shows is taken.
  test.each([
    ["create", ["--org", "o", "--project", "p", "--env", "e", "--scope", "events:read"]],
    ["list", []],
    ["revoke", ["ck_x"]],
  ])("celld keys %s shows -c FILE beside --data DIR", (action, rest) => {
    const line = usage.split("\n").find((l) => l.includes(`celld keys ${action}`));
    expect(line).toContain("[--data DIR] [-c FILE]");
    const nested = join(cwd, "app");
    mkdirSync(nested, { recursive: true });
    writeFileSync(join(nested, "wrangler.toml"), 'name = "w"\nmain = "index.js"\n');
    expect(parseKeysArgs([action, ...rest, "-c", join("app", "wrangler.toml")], cwd).dataDir).toBe(join(nested, ".celld"));
  });
});

describe("celld dev --env", () => {
  const cwd = projectDir();
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  test("--env and -e name the environment; without either the top level runs", () => {
    expect(parseDevArgs(["--env", "production"], cwd).environment).toBe("production");
    expect(parseDevArgs(["-e", "staging"], cwd).environment).toBe("staging");
    expect(parseDevArgs(["--env=staging"], cwd).environment).toBe("staging");
    expect(parseDevArgs([], cwd).environment).toBeUndefined();
  });

  test("CLOUDFLARE_ENV chooses it when --env does not, as in wrangler 4; empty is unset", () => {
    expect(parseDevArgs([], cwd, { CLOUDFLARE_ENV: "staging" }).environment).toBe("staging");
    expect(parseDevArgs(["--env", "production"], cwd, { CLOUDFLARE_ENV: "staging" }).environment).toBe("production");
    expect(parseDevArgs([], cwd, { CLOUDFLARE_ENV: "" }).environment).toBeUndefined();
  });

  test("an empty name, or one that could not be a file or Worker name suffix, is refused by its source", () => {
    expect(refusal(() => parseDevArgs(["--env", ""], cwd))).toBe("--env needs an environment name, got an empty one");
    expect(refusal(() => parseDevArgs(["--env", "../prod"], cwd))).toBe(
      '--env must be an environment name of letters, digits, "_" and "-", got "../prod"',
    );
    expect(refusal(() => parseDevArgs([], cwd, { CLOUDFLARE_ENV: "prod uction" }))).toBe(
      'CLOUDFLARE_ENV must be an environment name of letters, digits, "_" and "-", got "prod uction"',
    );
    expect(refusal(() => parseDevArgs(["-e"], cwd))).toBe("-e/--env needs a value");
    expect(refusal(() => parseDevArgs(["--env"], cwd))).toBe("-e/--env needs a value");
  });

  test("the usage text names the option", () => {
    expect(usage).toContain("-e, --env ENV");
    expect(usage).toContain("CLOUDFLARE_ENV");
  });
});

describe("celld dev --test-scheduled", () => {
  const cwd = projectDir();
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  test("is off unless given, takes no value, and is in the usage text", () => {
    expect(parseDevArgs([], cwd).testScheduled).toBe(false);
    expect(parseDevArgs(["--test-scheduled"], cwd).testScheduled).toBe(true);
    expect(refusal(() => parseDevArgs(["--test-scheduled=yes"], cwd))).toMatch(/--test-scheduled/);
    expect(refusal(() => parseDevArgs(["--test-schedule"], cwd))).toBe("unknown option --test-schedule (did you mean --test-scheduled?)");
    expect(usage).toContain("--test-scheduled");
  });
});

describe("celld dev --watch", () => {
  const cwd = projectDir();
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  test("is off unless given, takes no value, and is in the usage text", () => {
    expect(parseDevArgs([], cwd).watch).toBe(false);
    expect(parseDevArgs(["--watch"], cwd).watch).toBe(true);
    expect(refusal(() => parseDevArgs(["--watch=yes"], cwd))).toMatch(/--watch/);
    expect(refusal(() => parseDevArgs(["--wach"], cwd))).toBe("unknown option --wach (did you mean --watch?)");
    expect(usage).toContain("--watch             restart the Workers");
  });
});

describe("celld dev --inspector-port", () => {
  const cwd = projectDir();
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  test("is off unless given, takes a port, and must differ from the other ports", () => {
    expect(parseDevArgs([], cwd).inspectorPort).toBeUndefined();
    expect(parseDevArgs(["--inspector-port", "9229"], cwd).inspectorPort).toBe(9229);
    expect(parseDevArgs(["--inspector-port", "0", "--port", "0"], cwd).inspectorPort).toBe(0);
    expect(refusal(() => parseDevArgs(["--inspector-port", "65536"], cwd))).toBe('--inspector-port must be a port number from 0 to 65535, got "65536"');
    expect(refusal(() => parseDevArgs(["--inspector-port", "8787"], cwd))).toBe(
      "--inspector-port must differ from --port (both 8787): the inspector needs a port of its own",
    );
    expect(refusal(() => parseDevArgs(["--inspector-port", "9000", "--api-port", "9000"], cwd))).toBe(
      "--inspector-port must differ from --api-port (both 9000): the inspector needs a port of its own",
    );
    expect(usage).toContain("--inspector-port PORT");
  });
});
