import { describe, expect, it } from "vitest";
import { UsageError } from "../src/cli/args.ts";
import { parseServeArgs } from "../src/cli/serve-args.ts";

describe("celld serve's options", () => {
  it("takes the Workers environment, by default celld dev's", () => {
    expect(parseServeArgs([], "/srv").workersEnv).toBe("orgs/local/projects/local/envs/dev");
    expect(parseServeArgs(["--workers-env", "orgs/acme/projects/web/envs/prod"], "/srv").workersEnv).toBe("orgs/acme/projects/web/envs/prod");
  });

  it("refuses a Workers environment that is not orgs/O/projects/P/envs/E, naming the option", () => {
    for (const bad of ["acme", "orgs/acme/projects/web", "orgs/acme/projects/web/envs/prod/queues/q", "orgs/a b/projects/p/envs/e"]) {
      expect(() => parseServeArgs(["--workers-env", bad], "/srv")).toThrow(UsageError);
      expect(() => parseServeArgs(["--workers-env", bad], "/srv")).toThrow(/--workers-env/);
    }
  });
});
