import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, onTestFinished, test } from "vitest";
import { dataDirAccessWarning } from "../src/host/data-dir-access.ts";

function dirWithMode(name: string, mode: number): string {
  const parent = mkdtempSync(join(tmpdir(), "celld-access-"));
  onTestFinished(() => rmSync(parent, { recursive: true, force: true }));
  const dir = join(parent, name);
  mkdirSync(dir);
  // chmod, not mkdir's mode: the umask would take bits off it.
  chmodSync(dir, mode);
  return dir;
}

test("a data directory only its owner may enter gets no warning", () => {
  expect(dataDirAccessWarning(dirWithMode("data", 0o700))).toBeUndefined();
  expect(dataDirAccessWarning(dirWithMode("data", 0o500))).toBeUndefined();
});

test("one that others may enter is named with its mode, who may read it, and the chmod that closes it", () => {
  const open = dirWithMode("data", 0o755);
  expect(dataDirAccessWarning(open)).toBe(
    `the data directory ${open} is mode 0755: every local user may read what is in it ` +
      `(the Workers' KV, D1, R2 and Durable Object data); make it this user's alone with: chmod 700 ${open}`,
  );
  const group = dirWithMode("data", 0o750);
  expect(dataDirAccessWarning(group)).toMatch(new RegExp(`is mode 0750: its group may read what is in it .*: chmod 700 ${group}$`));
  // Execute alone lets others open files whose names they know.
  expect(dataDirAccessWarning(dirWithMode("data", 0o701))).toMatch(/is mode 0701: every local user may read/);
});

test("the chmod command quotes a path the shell would split", () => {
  const spaced = dirWithMode("my data's", 0o777);
  expect(dataDirAccessWarning(spaced)).toMatch(/: chmod 700 '.*\/my data'\\''s'$/);
});
