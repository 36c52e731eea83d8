import { describe, expect, test } from "vitest";
import { ServiceWorkerConsole } from "../src/worker-code/service-worker-console.ts";

// Lines as workerd 2026-04-26 writes them with --verbose (seen with Miniflare 4 here).
const logged = (json: string) => `workerd/io/worker.c++:2228: info: console.log(); message() = ${json}`;

describe("a service-worker script's console output, read back from workerd's verbose lines", () => {
  test("strings as they are, other values as JSON, separated by spaces; no arguments, an empty line", () => {
    const c = new ServiceWorkerConsole();
    expect(c.read(logged('["SW LOG", {"a":1,"b":[1,2]}, 42]'))).toEqual({ output: 'SW LOG {"a":1,"b":[1,2]} 42' });
    expect(c.read(logged('["q\\"uote\\nnew", null, true, "10"]'))).toEqual({ output: 'q"uote\nnew null true 10' });
    expect(c.read(logged("[]"))).toEqual({ output: "" });
  });

  test("workerd's other informational lines are dropped with the indented lines under them; anything else is left alone", () => {
    const c = new ServiceWorkerConsole();
    expect(c.read("workerd/io/worker.c++:2484: info: uncaught exception; source = Uncaught; stack = Error: sw boom")).toBe("drop");
    expect(c.read("    at script-0:1:105")).toBe("drop");
    expect(c.read("workerd/jsg/util.c++:407: info: exception = kj/async-io-unix.c++:1538: disconnected: connect(): Connection refused")).toBe("drop");
    // Not indented: the dropped line's continuation has ended.
    expect(c.read("a Worker's own stderr line")).toBeUndefined();
    expect(c.read("    indented, but under no dropped line")).toBeUndefined();
    expect(c.read('workerd/server/server.c++:5492: error: Uncaught exception: ...: failed: jsg.Error: boom')).toBeUndefined();
  });

  test("a console line whose arguments are not the JSON array workerd writes is dropped as informational, not misread", () => {
    const c = new ServiceWorkerConsole();
    expect(c.read(logged("[not json"))).toBe("drop");
  });
});
