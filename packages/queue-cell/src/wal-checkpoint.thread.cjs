// @ts-check
// The WalCheckpointer's thread (wal-checkpointer.ts): copies cells' logs into their database files
// and truncates quiet ones, off the host's event loop. Plain CommonJS, so that the thread needs no
// TypeScript loader; checked by tsc with packages/queue-cell/tsconfig.thread.json. Its parameters
// come in workerData (ThreadParameters): where better-sqlite3 is, and the truncation claim's values.
"use strict";

const { openSync, closeSync, fsyncSync } = require("node:fs");
const { parentPort, workerData } = require("node:worker_threads");

/**
 * @typedef {{ betterSqlite3: string; claim: { asked: number; started: number; cancelled: number } }} ThreadParameters
 * @typedef {{ id: number; kind: "checkpoint"; path: string }
 *   | { id: number; kind: "truncate"; path: string; claim?: Int32Array }
 *   | { id: 0; kind: "forget"; path: string; done: Int32Array }} Request
 * @typedef {{ db: import("better-sqlite3").Database; fd: number }} OpenFile
 */

const parameters = /** @type {ThreadParameters} */ (workerData);
const Database = /** @type {typeof import("better-sqlite3")} */ (require(parameters.betterSqlite3));
const port = /** @type {import("node:worker_threads").MessagePort} */ (parentPort);

/** @type {Map<string, OpenFile>} */
const files = new Map();

/** @param {string} path */
function forget(path) {
  const file = files.get(path);
  files.delete(path);
  try {
    file?.db.close();
  } catch {}
  // Closing a file drops every POSIX lock this process holds on it, SQLite's included. Under the
  // data directory's lock no other process opens the file, and in this process SQLite keeps its
  // locks in memory, so the writer's connection does not rely on them.
  try {
    if (file !== undefined) closeSync(file.fd);
  } catch {}
}

/** @param {string} path @returns {OpenFile} */
function open(path) {
  let file = files.get(path);
  if (file === undefined) {
    const db = new Database(path, { fileMustExist: true });
    db.pragma("wal_autocheckpoint = 0");
    db.pragma("synchronous = FULL");
    file = { db, fd: openSync(path, "r") };
    files.set(path, file);
  }
  return file;
}

port.on("message", (/** @type {Request} */ request) => {
  if (request.kind === "forget") {
    forget(request.path);
    Atomics.store(request.done, 0, 1);
    Atomics.notify(request.done, 0);
    return;
  }
  // The writer committed while this waited here: its queue is in use again, so no truncation.
  const claim = request.kind === "truncate" ? request.claim : undefined;
  const { asked, started, cancelled } = parameters.claim;
  if (claim !== undefined && Atomics.compareExchange(claim, 0, asked, started) === cancelled) {
    port.postMessage({ id: request.id });
    return;
  }
  try {
    const file = open(request.path);
    if (request.kind === "truncate") {
      const result = /** @type {Array<{ busy: number }>} */ (file.db.pragma("wal_checkpoint(TRUNCATE)"))[0];
      if (result === undefined) throw new Error("wal_checkpoint(TRUNCATE) answered no row");
      const busy = result.busy !== 0;
      // The queue is quiet: the next copy of its log opens the file again. Kept, the connection and
      // its descriptor held 3 more for every queue ever written (8 instead of 5), for good.
      if (!busy) forget(request.path);
      port.postMessage({ id: request.id, busy });
      return;
    }
    file.db.pragma("wal_checkpoint(PASSIVE)");
    // SQLite flushes the file only after a copy that reaches the end of the log, which under
    // steady writes is the writer's short one: flushed here, that one has little left to flush.
    try {
      fsyncSync(file.fd);
    } catch (error) {
      /** @type {{ flushFailed?: boolean }} */ (error).flushFailed = true;
      throw error;
    }
    port.postMessage({ id: request.id });
  } catch (error) {
    const failure = /** @type {{ flushFailed?: boolean; code?: unknown; message?: unknown } | null | undefined} */ (error);
    const flushFailed =
      failure != null && (failure.flushFailed === true || /^SQLITE_IOERR_(DIR_)?FSYNC$/.test(String(failure.code)));
    port.postMessage({ id: request.id, error: String(failure && failure.message ? failure.message : failure), flushFailed });
  }
});
