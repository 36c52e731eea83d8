import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { UsageError, parseDevArgs, parseKeysArgs } from "../src/cli/args.ts";

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

  test("an option without its value says so", () => {
    expect(refusal(() => parseDevArgs(["--port"], cwd))).toBe("--port needs a value");
    expect(refusal(() => parseDevArgs(["-c"], cwd))).toBe("-c needs a value");
    expect(refusal(() => parseKeysArgs(["create", "--org"], cwd))).toBe("--org needs a value");
  });

  test("a port out of range names the flag and the bound", () => {
    expect(refusal(() => parseDevArgs(["--port", "70000"], cwd))).toBe('--port must be a port number from 0 to 65535, got "70000"');
    // A negative value is a value, not the next option.
    expect(refusal(() => parseDevArgs(["--port", "-1"], cwd))).toBe('--port must be a port number from 0 to 65535, got "-1"');
    expect(refusal(() => parseDevArgs(["--api-port", "-8"], cwd))).toBe('--api-port must be a port number from 0 to 65535, got "-8"');
  });
});
