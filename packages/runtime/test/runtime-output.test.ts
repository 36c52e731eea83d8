import { describe, expect, test } from "vitest";
import { RuntimeOutputFilter } from "../src/workerd/runtime-output.ts";

// Lines as workerd 2026-04-26 and the handler shim print them.
const shimReport = "[celld] fetch() handler for GET /throw threw: TypeError: boom in fetch";
const workerdUncaught =
  "workerd/server/server.c++:5492: error: Uncaught exception: workerd/jsg/_virtual_includes/iterator/workerd/jsg/value.h:1480: failed: remote.jsg.TypeError: boom in fetch";

function shown(lines: Array<[string, "stdout" | "stderr"]>): string[] {
  const filter = new RuntimeOutputFilter();
  return lines.filter(([line, stream]) => filter.shows(line, stream)).map(([line]) => line);
}

describe("workerd's output in the host log", () => {
  test("workerd's line for an error the shim reported is dropped once; the shim's report and stack stay", () => {
    const stackLine = "    at Object.fetch (file:///app/index.js:2:77)";
    expect(
      shown([
        [shimReport, "stderr"],
        [stackLine, "stderr"],
        [workerdUncaught, "stderr"],
        // The same error again without a new report from the shim: nothing says it twice, so it stays.
        [workerdUncaught, "stderr"],
      ]),
    ).toEqual([shimReport, stackLine, workerdUncaught]);
  });

  test("an uncaught exception the shim did not report stays", () => {
    const other = workerdUncaught.replace("boom in fetch", "thrown in waitUntil");
    expect(shown([[shimReport, "stderr"], [other, "stderr"]])).toEqual([shimReport, other]);
    expect(shown([[workerdUncaught, "stderr"]])).toEqual([workerdUncaught]);
  });

  test("workerd's native stack is dropped", () => {
    expect(shown([["stack: 7f1c2a@4e5b1 7f1c2b@4e5c0", "stderr"]])).toEqual([]);
  });

  test("a Worker's console output passes as it is, even when it looks like workerd's", () => {
    expect(shown([[workerdUncaught, "stdout"], ["stack: 1@2", "stdout"], ["hello", "stdout"]])).toEqual([
      workerdUncaught,
      "stack: 1@2",
      "hello",
    ]);
  });
});
