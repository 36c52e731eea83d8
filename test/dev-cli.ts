import { afterEach } from "vitest";
import { run, type Run } from "./cli-harness.ts";
import { project, type Project } from "./host-harness.ts";

export interface DevScratch {
  /** A project directory, removed after the test. */
  project(): Project;
  /** `celld` with `args` in `cwd`, stopped (SIGTERM) after the test unless `forget` was told. */
  run(args: string[], cwd: string): Run;
  /** The test stopped this run itself: nothing to do after it. */
  forget(r: Run): void;
}

/**
 * What the tests of the real `celld dev` leave behind, cleaned after each test: the runs first
 * (a project goes only once nothing holds it), then the projects. Call once, at the top of a file.
 */
export function devScratchAfterEach(): DevScratch {
  const projects: Project[] = [];
  const runs: Run[] = [];
  afterEach(async () => {
    for (const r of runs.splice(0)) {
      r.kill("SIGTERM");
      await r.exited;
    }
    projects.splice(0).forEach((p) => p.remove());
  });
  return {
    project() {
      const p = project();
      projects.push(p);
      return p;
    },
    run(args, cwd) {
      const r = run(args, cwd);
      runs.push(r);
      return r;
    },
    forget(r) {
      const at = runs.indexOf(r);
      if (at >= 0) runs.splice(at, 1);
    },
  };
}
