import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { createServer } from "node:net";
import { unixDirectSocket, unixDirectSocketListening } from "../src/queue-transport/queue-dispatch-worker.ts";
import { SocketDir } from "../src/queue-transport/socket-dir.ts";

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), "celld-sockdir-"));
  made.push(dir);
  return dir;
}

describe.skipIf(process.platform === "win32")("SocketDir", () => {
  test("a given directory is made mode 0700, sockets a crashed host left in it are removed, and close removes only the sockets", () => {
    const run = join(scratch(), "run");
    mkdirSync(run, { mode: 0o755 });
    writeFileSync(join(run, "a.sock"), "left by a crash");
    writeFileSync(join(run, "other"), "not ours");
    const dir = SocketDir.open(["a.sock", "b:0"], run)!;
    expect(dir.path).toBe(run);
    expect(statSync(run).mode & 0o777).toBe(0o700);
    expect(existsSync(join(run, "a.sock"))).toBe(false);
    expect(dir.socketPath("b:0")).toBe(join(run, "b:0"));
    writeFileSync(join(run, "b:0"), "");
    dir.close();
    expect(existsSync(join(run, "b:0"))).toBe(false);
    expect(existsSync(join(run, "other"))).toBe(true);
  });

  test("without a directory, or with one whose socket paths would be too long, a private one is made and removed on close", () => {
    const long = join(scratch(), "x".repeat(120));
    for (const given of [undefined, long]) {
      const dir = SocketDir.open(["s.sock"], given)!;
      expect(dir.path.startsWith(tmpdir())).toBe(true);
      expect(statSync(dir.path).mode & 0o777).toBe(0o700);
      dir.close();
      expect(existsSync(dir.path)).toBe(false);
    }
    expect(existsSync(long)).toBe(false);
  });

  test("a socket not named when the directory was opened is refused", () => {
    const dir = SocketDir.open(["s.sock"], join(scratch(), "run"))!;
    expect(() => dir.socketPath("t.sock")).toThrow(/socket "t.sock" was not named/);
    expect(dirname(dir.socketPath("s.sock"))).toBe(dir.path);
  });
});

test("a Unix direct socket is written as Miniflare will join it: host `unix:` and the path, port 0", () => {
  expect(unixDirectSocket("/d/run/queue-dispatch:0")).toEqual({ host: "unix:/d/run/queue-dispatch", port: 0 });
  expect(() => unixDirectSocket("/d/run/queue-dispatch")).toThrow(/must end in ":0"/);
});

test.skipIf(process.platform === "win32")("a dispatch socket workerd is not listening on is an error naming Miniflare's version", async () => {
  const dir = scratch();
  const missing = join(dir, "queue-dispatch:0");
  expect(() => unixDirectSocketListening(missing)).toThrow(/with miniflare \S+ workerd is not listening at .*queue-dispatch:0/);
  writeFileSync(missing, "a file, not a socket");
  expect(() => unixDirectSocketListening(missing)).toThrow(/not listening/);
  const socketPath = join(dir, "live:0");
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  try {
    expect(unixDirectSocketListening(socketPath)).toBe(socketPath);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
