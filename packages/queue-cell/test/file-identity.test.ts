/**
 * FileIdentity: whether a store's files are still the ones at their paths, checked after every
 * flush by one stat of their directory while it is settled and unchanged, and by a stat of each
 * file otherwise. The directory counts as settled once its last change is two seconds behind the
 * clock; these tests settle it by running the clock a minute ahead rather than by waiting. That
 * leaves two changes within one tick of the file system's clock looking like one, so the tests of a
 * settled directory run only where a directory's timestamps tell changes apart at once (Linux 6.13
 * and later stamp a change finely once the last stamp was read, as these checks read it).
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { FileIdentity } from "../src/file-identity.ts";
import { tempDir } from "./temp-dir.ts";

const aMinuteAhead = () => Date.now() + 60_000;

/** Whether each change to a directory just read gets a timestamp of its own, three times over. */
function directoryStampsEachChange(): boolean {
  const dir = mkdtempSync(join(tmpdir(), "celld-stamps-"));
  try {
    for (let i = 0; i < 3; i++) {
      const before = statSync(dir, { bigint: true }).ctimeNs;
      writeFileSync(join(dir, `probe-${i}`), "");
      if (statSync(dir, { bigint: true }).ctimeNs === before) return false;
    }
    return true;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const settledTest = test.skipIf(!directoryStampsEachChange());

/** Two files in a fresh directory, and statSync wrapped to list the paths it looks up. */
function setUp(now: () => number) {
  const dir = join(tempDir(), "cells");
  mkdirSync(dir);
  const db = join(dir, "q.sqlite");
  const wal = `${db}-wal`;
  writeFileSync(db, "db");
  writeFileSync(wal, "wal");
  const looked: string[] = [];
  let afterLookUp: ((path: string) => void) | undefined;
  const stat = ((path: string, options?: object) => {
    looked.push(path);
    try {
      return statSync(path, options);
    } finally {
      afterLookUp?.(path);
    }
  }) as typeof statSync;
  const identity = FileIdentity.of([db, wal], { now, stat });
  looked.length = 0;
  return {
    dir,
    db,
    wal,
    identity,
    looked,
    /** Runs `then` right after each lookup, once it has been answered. */
    afterEachLookUp(then: (path: string) => void) {
      afterLookUp = then;
    },
  };
}

describe("a settled directory", () => {
  settledTest("is all a check looks at while nothing in it changes", () => {
    const { dir, identity, looked } = setUp(aMinuteAhead);
    expect(identity.changed()).toBeUndefined();
    expect(identity.changed()).toBeUndefined();
    expect(looked).toEqual([dir, dir]);
  });

  settledTest("shows a file deleted", () => {
    const { wal, identity } = setUp(aMinuteAhead);
    expect(identity.changed()).toBeUndefined();
    rmSync(wal);
    expect(identity.changed()).toBe(`${wal} is gone`);
  });

  settledTest("shows a file replaced by another renamed over it", () => {
    const { dir, db, identity } = setUp(aMinuteAhead);
    expect(identity.changed()).toBeUndefined();
    writeFileSync(join(dir, "copy"), "db");
    renameSync(join(dir, "copy"), db);
    expect(identity.changed()).toBe(`${db} is another file now`);
  });

  settledTest("shows the directory moved away, and another put in its place", () => {
    const moved = setUp(aMinuteAhead);
    renameSync(moved.dir, `${moved.dir}-old`);
    expect(moved.identity.changed()).toBe(`${moved.db} is gone`);

    const replaced = setUp(aMinuteAhead);
    renameSync(replaced.dir, `${replaced.dir}-old`);
    mkdirSync(replaced.dir);
    writeFileSync(replaced.db, "db");
    writeFileSync(replaced.wal, "wal");
    expect(replaced.identity.changed()).toBe(`${replaced.db} is another file now`);
  });

  settledTest("shows the directory turned into a file", () => {
    const { dir, db, identity } = setUp(aMinuteAhead);
    rmSync(dir, { recursive: true });
    writeFileSync(dir, "not a directory");
    expect(identity.changed()).toBe(`${db} is gone`);
  });

  settledTest("changed by another file in it is looked into once, and trusted again after", () => {
    const { dir, db, wal, identity, looked } = setUp(aMinuteAhead);
    writeFileSync(join(dir, "other.sqlite"), "another queue");
    expect(identity.changed()).toBeUndefined();
    expect(looked).toEqual([dir, db, wal]);
    looked.length = 0;
    expect(identity.changed()).toBeUndefined();
    expect(looked).toEqual([dir]);
  });
});

describe("a directory changed in the last two seconds", () => {
  test("has every file looked at by every check, since a change in the same tick can leave its timestamps as they were", () => {
    const { dir, db, wal, identity, looked } = setUp(Date.now);
    expect(identity.changed()).toBeUndefined();
    expect(identity.changed()).toBeUndefined();
    expect(looked).toEqual([dir, db, wal, dir, db, wal]);
  });

  test("still shows a file deleted", () => {
    const { db, identity } = setUp(Date.now);
    rmSync(db);
    expect(identity.changed()).toBe(`${db} is gone`);
  });
});

settledTest("a file deleted just after a check looked at it is seen by the next check", () => {
  const { dir, wal, identity, afterEachLookUp } = setUp(aMinuteAhead);
  writeFileSync(join(dir, "other.sqlite"), "another queue");
  let deleted = false;
  afterEachLookUp((path) => {
    if (path === wal && !deleted) {
      deleted = true;
      rmSync(wal);
    }
  });
  expect(identity.changed()).toBeUndefined();
  expect(deleted).toBe(true);
  expect(identity.changed()).toBe(`${wal} is gone`);
});
