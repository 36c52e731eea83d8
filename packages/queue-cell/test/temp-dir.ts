import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onTestFinished } from "vitest";

/**
 * A fresh directory per call, removed after the test that made it. onTestFinished, not afterEach:
 * an afterEach registered while a test runs never runs at all, and these directories piled up.
 */
export function tempDir(prefix = "celld-cell-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
