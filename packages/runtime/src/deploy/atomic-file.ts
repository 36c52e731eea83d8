import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { randomUUID } from "node:crypto";

/**
 * Replaces `path` whole: the bytes go to a new file beside it, are synced, and the file is renamed
 * over the old one, and the directory is synced. A crash (`kill -9`, power loss) at any point
 * leaves the old file or the new one, never a part of either. `mode` is the new file's from its
 * creation, so a secret is never readable by others, not even for a moment.
 */
export function replaceFile(path: string, data: string | Uint8Array, mode = 0o644): void {
  const temp = join(dirname(path), `.tmp-${randomUUID()}`);
  try {
    writeSynced(temp, data, mode);
    renameSync(temp, path);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  syncDir(dirname(path));
}

/** Writes a new file and syncs it (it must not exist: `wx`). */
export function writeSynced(path: string, data: string | Uint8Array, mode = 0o644): void {
  const fd = openSync(path, "wx", mode);
  try {
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    let written = 0;
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A rename or a new entry is durable only once its directory is synced. */
export function syncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
