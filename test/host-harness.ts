import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import { ManualClock, type Cell } from "@celld/queue-cell";
import type { BatchReport } from "@celld/bindings";
import { loadDeployment } from "../packages/runtime/src/config/index.ts";
import { startHost, type Host } from "../packages/runtime/src/host/host.ts";
import { MemoryHostLog } from "../packages/runtime/src/host/host-log.ts";
import type { AddedConsumers } from "../packages/runtime/src/plugins/added-consumers.ts";
import { childProcesses } from "../packages/runtime/src/workerd/workerd-orphans.ts";

export interface Project {
  dir: string;
  dataDir: string;
  /** Writes files relative to the project; returns the path of the first. */
  write(files: Record<string, string>): string;
  remove(): void;
}

export function project(): Project {
  const dir = mkdtempSync(join(tmpdir(), "celld-e2e-"));
  return {
    dir,
    dataDir: join(dir, ".celld"),
    write(files) {
      let first = "";
      for (const [name, text] of Object.entries(files)) {
        const path = join(dir, name);
        mkdirSync(join(path, ".."), { recursive: true });
        writeFileSync(path, text);
        if (first === "") first = path;
      }
      return first;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface RunningHost {
  host: Host;
  clock: ManualClock;
  log: MemoryHostLog;
  batches: BatchReport[];
  fetch(path: string, init?: RequestInit): Promise<Response>;
  cell(queue: string): Promise<Cell>;
  close(): Promise<void>;
}

/** Starts the host on the project's configs with a manual clock, as `celld dev` would. */
export async function runHost(
  configs: string[],
  dataDir: string,
  options: {
    wallTimeSeconds?: number;
    clock?: ManualClock;
    batchBytesInFlightMax?: number;
    workerdV8Flags?: readonly string[];
    openFilesLimit?: number;
    /** The Workers port's connection maximum; else sized from openFilesLimit's descriptor budget. */
    connectionsMax?: number;
    triggerHandlers?: boolean;
    onRuntimeExit?: (reason: string) => void;
    addedConsumers?: AddedConsumers;
  } = {},
): Promise<RunningHost> {
  const clock = options.clock ?? new ManualClock(Date.now());
  const log = new MemoryHostLog();
  const batches: BatchReport[] = [];
  const host = await startHost({
    deployment: loadDeployment(configs),
    dataDir,
    port: 0,
    clock,
    log,
    durability: "normal",
    consumerWallTimeSeconds: options.wallTimeSeconds ?? 30,
    consumerBatchBytesInFlightMax: options.batchBytesInFlightMax,
    workerdV8Flags: options.workerdV8Flags,
    openFilesLimit: options.openFilesLimit,
    connectionsMax: options.connectionsMax,
    triggerHandlers: options.triggerHandlers,
    onRuntimeExit: options.onRuntimeExit,
    onBatch: (report) => batches.push(report),
    addedConsumers: options.addedConsumers,
  });
  return {
    host,
    clock,
    log,
    batches,
    fetch: (path, init) => fetch(new URL(path, host.url), init),
    cell: (queue) => host.registry.open(queue),
    close: () => host.close(),
  };
}

/** Polls (real time) until `check` returns a value that is not undefined, or fails after `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, what: string, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Reads every message in a queue without a consumer (the tests' "seen" log) and acks it. */
export async function drainJson(cell: Cell): Promise<unknown[]> {
  const out: unknown[] = [];
  for (;;) {
    const leased = await cell.lease({ max: 100 });
    if (leased.length === 0) return out;
    for (const m of leased) out.push(JSON.parse(new TextDecoder().decode(m.body)));
    await cell.ack(leased.map((m) => ({ id: m.id, leaseGeneration: m.leaseGeneration })));
  }
}

/**
 * The reports a test's Workers send to their "seen" queue, read as they come and kept in order:
 * all of them from a mark on, those of one tag, or those of a tag once `count` have come.
 */
export function seenReports<T extends { body?: { tag?: string } | null }>(cell: () => Promise<Cell>) {
  let seen: T[] = [];
  const since = async (mark: number): Promise<T[]> => {
    seen = seen.concat((await drainJson(await cell())) as T[]);
    return seen.slice(mark);
  };
  const forTag = async (tag: string): Promise<T[]> => (await since(0)).filter((s) => s.body?.tag === tag);
  return {
    since,
    /** Where the reports so far end, for since(). */
    mark: async (): Promise<number> => (await since(0)).length,
    forTag,
    waitFor: (tag: string, count: number): Promise<T[]> =>
      eventually(async () => {
        const got = await forTag(tag);
        return got.length >= count ? got : undefined;
      }, `${count} deliveries of "${tag}"`),
  };
}

/**
 * For a test file: projects and hosts made through the returned functions are closed and removed
 * after each test, whether it passed or not.
 */
export function tidyAfterEach(): { project: () => Project; runHost: typeof runHost } {
  const projects: Project[] = [];
  const hosts: RunningHost[] = [];
  afterEach(async () => {
    await Promise.all(hosts.splice(0).map((h) => h.close()));
    projects.splice(0).forEach((p) => p.remove());
  });
  return {
    project: () => {
      const p = project();
      projects.push(p);
      return p;
    },
    runHost: async (...args) => {
      const h = await runHost(...args);
      hosts.push(h);
      return h;
    },
  };
}

/** Processes whose parent is `pid`, with their names, from /proc (Linux only). */
export function childProcessesOf(pid: number): Array<{ pid: number; name: string }> {
  return childProcesses(pid).map(({ pid: child, name }) => ({ pid: child, name }));
}

/** The host log once a line matches `pattern`, as one text. */
export function logOnceItShows(running: RunningHost, pattern: RegExp, what: string): Promise<string> {
  const log = running.log;
  return eventually(() => {
    const text = log.lines.join("\n");
    return pattern.test(text) ? text : undefined;
  }, what);
}
