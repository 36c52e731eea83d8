/**
 * A host under benchmark runs in its own process, so that both hosts are measured alike: celld
 * (bench/celld-host.ts) and Miniflare's in-memory queues (bench/miniflare-host.ts), which must
 * never share a process with celld because celld's queue wiring patches Miniflare process-wide.
 * The bench process only drives HTTP and keeps time.
 *
 * The child's side is serveHost; the parent's is spawnHost. Over the IPC channel the child says
 * `ready` (with its URL) once; the parent asks `count` (answered with the messages consumed so
 * far), `watch` (answered with `reached` and the monotonic time, once that many are consumed),
 * `loop` (its event loop's time so far) and `stop`. Each host counts consumption where it settles
 * a batch: celld's `onBatch` report after the acks commit, Miniflare's broker log line after it
 * has applied the batch's outcome. The child says nothing per batch: a message a batch cost
 * celld's busy Node thread 3-4% of its samples and woke this process each time, a cost of the
 * bench, not of a host.
 *
 * Imports nothing from celld (the Miniflare child loads this file).
 */
import { fork, type ChildProcess } from "node:child_process";
import { performance } from "node:perf_hooks";

type ChildMessage =
  | { type: "ready"; url: string; directUrl?: string }
  | { type: "count"; count: number }
  /** `at`: process.hrtime.bigint() (CLOCK_MONOTONIC, the same clock in both processes), as a string. */
  | { type: "reached"; target: number; at: string }
  | { type: "loop"; time: LoopTime }
  | { type: "failed"; message: string };

type ParentMessage = { type: "stop" } | { type: "loop" } | { type: "count" } | { type: "watch"; target: number };

/** The host's main thread since it started, ms: running callbacks (active) or waiting for I/O (idle). */
export interface LoopTime {
  active: number;
  idle: number;
  /** celld: where each send's time went since the last ask (ServedHost.takeStages), in ms by stage. */
  stages?: StageSample[];
}

/** One producer call's stages, ms by name (celld's SendStages, read here without importing celld). */
export type StageSample = Record<string, number | string>;

export interface ServedHost {
  url: URL;
  /** celld: where workerd serves the first Worker, behind the front on `url` (bench/front-door.ts). */
  directUrl?: URL;
  /** The stages of the sends since the last call (celld only), handed out once. */
  takeStages?(): StageSample[];
  close(): Promise<void>;
}

/** Starts a host; `consumed(n)` is to be called with the acked count of each settled batch. */
export type HostStarter = (consumed: (count: number) => void) => Promise<ServedHost>;

/** The child's side: starts the host, reports to the parent, and closes it on stop or signal. */
export function serveHost(start: HostStarter): void {
  const send = process.send?.bind(process);
  if (send === undefined) throw new Error("a bench host runs as a child of the bench (spawnHost); it needs an IPC channel");
  let consumed = 0;
  // Targets the parent waits for, in no order; few at a time (one per run).
  let watches: number[] = [];
  const reached = (target: number): void => {
    if (process.connected) send({ type: "reached", target, at: process.hrtime.bigint().toString() } satisfies ChildMessage);
  };
  let served: ServedHost | undefined;
  const starting = start((count) => {
    consumed += count;
    const due = watches.filter((t) => t <= consumed);
    if (due.length === 0) return;
    watches = watches.filter((t) => t > consumed);
    for (const target of due) reached(target);
  });
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    // A stop that arrives while the host is still starting waits for it, so workerd never outlives us.
    void starting
      .then((host) => host.close())
      .then(
        () => process.exit(),
        (error: unknown) => {
          console.error("bench host: closing failed", error);
          process.exit(1);
        },
      );
  };
  process.on("message", (message: ParentMessage) => {
    if (message.type === "stop") stop();
    if (message.type === "count" && process.connected) send({ type: "count", count: consumed } satisfies ChildMessage);
    if (message.type === "watch") {
      if (consumed >= message.target) reached(message.target);
      else watches.push(message.target);
    }
    if (message.type === "loop" && process.connected) {
      const { active, idle } = performance.eventLoopUtilization();
      send({ type: "loop", time: { active, idle, stages: served?.takeStages?.() } } satisfies ChildMessage);
    }
  });
  // The bench went away (crashed or was interrupted): clean up all the same.
  process.on("disconnect", stop);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // Say which process failed (the bench's output interleaves three), then close the host anyway.
  process.on("uncaughtException", (error) => {
    console.error(`bench host (pid ${process.pid}, ${process.argv[1]}): uncaught exception`, error);
    process.exitCode = 1;
    stop();
  });
  starting.then(
    (host) => {
      served = host;
      send({ type: "ready", url: host.url.href, directUrl: host.directUrl?.href } satisfies ChildMessage);
    },
    (error: unknown) => {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      send({ type: "failed", message } satisfies ChildMessage, () => process.exit(1));
    },
  );
}

export interface HostProcess {
  readonly name: string;
  readonly url: URL;
  /** See ServedHost.directUrl. */
  readonly directUrl: URL | undefined;
  /** The host's Node process (its workerd runs beneath it). */
  readonly pid: number;
  /** Messages consumed (acked) since the host started, as the host counts them now. */
  consumedCount(): Promise<number>;
  /** Resolves with the time (this process's performance.now()) the host's count reached `target`. */
  untilConsumed(target: number, timeoutMs: number): Promise<number>;
  /** The host process's event-loop time so far (Node's eventLoopUtilization). */
  loopTime(): Promise<LoopTime>;
  /** Asks the host to close and waits for its process to end (killing it after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<void>;
}

interface Waiter {
  target: number;
  resolve: (at: number) => void;
  reject: (error: Error) => void;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/**
 * Runs `entry` (a .ts file) as a child through tsx and waits until its host is ready. `env` adds
 * to (or, with undefined, removes from) this process's environment, for the child only.
 */
export async function spawnHost(
  name: string,
  entry: string,
  options: { env?: Record<string, string | undefined>; startTimeoutMs?: number } = {},
): Promise<HostProcess> {
  const startTimeoutMs = options.startTimeoutMs ?? 90_000;
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // SIGTERM, not SIGKILL: the child then closes its host, and with it workerd.
    process.on("exit", () => {
      for (const child of live) child.kill("SIGTERM");
    });
  }
  // CELLD_BENCH_CHILD_ARGS passes Node flags to the hosts, e.g. "--cpu-prof --cpu-prof-dir=prof".
  const extra = (process.env.CELLD_BENCH_CHILD_ARGS ?? "").split(" ").filter((a) => a !== "");
  const env = { ...process.env, ...options.env };
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key];
  const child = fork(entry, [], { env, execArgv: ["--import", "tsx", ...extra], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  live.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => live.delete(child));

  let waiters: Waiter[] = [];
  // Answers come in the order asked: one channel, one thread answering.
  let loopAsks: Array<{ resolve: (time: LoopTime) => void; reject: (error: Error) => void }> = [];
  let countAsks: Array<{ resolve: (count: number) => void; reject: (error: Error) => void }> = [];
  let directUrl: URL | undefined;
  const url = await new Promise<URL>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name}: not ready after ${startTimeoutMs} ms`)), startTimeoutMs);
    child.on("message", (message: ChildMessage) => {
      if (message.type === "ready") {
        clearTimeout(timer);
        if (message.directUrl !== undefined) directUrl = new URL(message.directUrl);
        resolve(new URL(message.url));
      } else if (message.type === "failed") {
        clearTimeout(timer);
        reject(new Error(`${name} failed to start:\n${message.message}`));
      } else if (message.type === "loop") {
        loopAsks.shift()?.resolve(message.time);
      } else if (message.type === "count") {
        countAsks.shift()?.resolve(message.count);
      } else {
        // The child's monotonic time, on this process's performance.now() scale.
        const at = performance.now() - Number(process.hrtime.bigint() - BigInt(message.at)) / 1e6;
        const due = waiters.filter((w) => w.target === message.target);
        waiters = waiters.filter((w) => w.target !== message.target);
        for (const w of due) w.resolve(at);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`${name}: its process ended before it was ready (exit code ${child.exitCode})`));
    });
  }).catch(async (error: unknown) => {
    child.kill("SIGTERM");
    await exited;
    throw error;
  });
  // A host that dies mid-run fails its waiters at once, not after their timeouts.
  let gone: Error | undefined;
  void exited.then(() => {
    gone = new Error(`${name}: its process ended (exit code ${child.exitCode}, signal ${child.signalCode})`);
    for (const w of waiters.splice(0)) w.reject(gone);
    for (const ask of [...loopAsks, ...countAsks]) ask.reject(gone);
    loopAsks = [];
    countAsks = [];
  });

  const consumedCount = (): Promise<number> => {
    if (gone !== undefined) return Promise.reject(gone);
    return new Promise<number>((resolve, reject) => {
      countAsks.push({ resolve, reject });
      child.send({ type: "count" } satisfies ParentMessage);
    });
  };
  return {
    name,
    url,
    directUrl,
    pid: child.pid!,
    consumedCount,
    untilConsumed(target, timeoutMs) {
      if (gone !== undefined) return Promise.reject(gone);
      return new Promise<number>((resolve, reject) => {
        const waiter: Waiter = {
          target,
          resolve: (at) => {
            clearTimeout(timer);
            resolve(at);
          },
          reject: (error) => {
            clearTimeout(timer);
            reject(error);
          },
        };
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w !== waiter);
          const fail = (count: string) => reject(new Error(`${name}: ${count} of ${target} messages consumed after ${timeoutMs} ms`));
          consumedCount().then((count) => fail(String(count)), () => fail("an unknown number"));
        }, timeoutMs);
        waiters.push(waiter);
        child.send({ type: "watch", target } satisfies ParentMessage);
      });
    },
    loopTime() {
      if (gone !== undefined) return Promise.reject(gone);
      return new Promise<LoopTime>((resolve, reject) => {
        loopAsks.push({ resolve, reject });
        child.send({ type: "loop" } satisfies ParentMessage);
      });
    },
    async stop(timeoutMs = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.connected) child.send({ type: "stop" } satisfies ParentMessage);
      else child.kill("SIGTERM");
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), timeoutMs)));
      const outcome = await Promise.race([exited, late]);
      clearTimeout(timer);
      if (outcome === "late") {
        console.error(`${name}: did not stop within ${timeoutMs} ms; killing it`);
        child.kill("SIGKILL");
        await exited;
      }
    },
  };
}
