import { describe, expect, it } from "vitest";
import { ownThreadCpu, threadsCpu, totalMs } from "../bench/thread-cpu.ts";
import { inFlightMax, threadsBenchOptions } from "../bench/threads-bench.ts";
import { outlookLines } from "../bench/threads-outlook.ts";
import { cpuLine } from "../bench/threads-report.ts";
import type { RunFigures } from "../bench/threads-run.ts";

describe("npm run bench threads' --threads", () => {
  it("takes a count as the next argument or after =", () => {
    expect(threadsBenchOptions([])).toEqual({});
    expect(threadsBenchOptions(["--threads", "3"])).toEqual({ threads: 3 });
    expect(threadsBenchOptions(["--threads=64"])).toEqual({ threads: 64 });
  });

  it.each([["0"], ["65"], ["two"], ["1.5"], [""]])("refuses %j, naming the flag and the bound", (value) => {
    expect(() => threadsBenchOptions(["--threads", value])).toThrow(`--threads must be a whole number from 1 to 64, got ${JSON.stringify(value)}`);
  });

  it("refuses a missing count", () => {
    expect(() => threadsBenchOptions(["--threads"])).toThrow("--threads must be a whole number from 1 to 64, got null");
  });

  it("takes --in-flight beside it, and refuses it out of bounds naming the flag", () => {
    expect(threadsBenchOptions(["--in-flight", "8", "--threads=2"])).toEqual({ threads: 2, inFlight: 8 });
    expect(threadsBenchOptions(["--in-flight=1"])).toEqual({ inFlight: 1 });
    expect(() => threadsBenchOptions(["--in-flight", "0"])).toThrow(`--in-flight must be a whole number from 1 to ${inFlightMax}, got "0"`);
    expect(() => threadsBenchOptions(["--in-flight", String(inFlightMax + 1)])).toThrow("--in-flight must be a whole number");
  });
});

describe.runIf(process.platform === "linux")("the bench's CPU by thread", () => {
  it("counts the calling thread's own work, and finds it among the process's threads by its pid", () => {
    const before = ownThreadCpu()!;
    // Spin until the thread's clock has moved (ticks are 10 ms); bounded, for a loaded machine.
    const deadline = Date.now() + 5_000;
    let after = before;
    while (totalMs(after) < totalMs(before) + 30 && Date.now() < deadline) after = ownThreadCpu()!;
    expect(totalMs(after)).toBeGreaterThanOrEqual(totalMs(before) + 30);
    const main = threadsCpu(process.pid)!.get(process.pid)!;
    expect(totalMs(main)).toBeGreaterThanOrEqual(totalMs(after));
  });
});

/** A run of 1 s that acked 10,000 messages: CPU ms given here are µs a message ×10. */
function run(queues: number, threads: number, mainMs: number, cellMs: number[], processMs: number, sentPerSecond = 20_000, inFlight = 1): RunFigures {
  return {
    queues,
    inFlight,
    placement: { threads },
    seconds: 1,
    sentPerSecond,
    ackedPerSecond: 10_000,
    main: { userMs: mainMs, systemMs: 0 },
    cellThreads: cellMs.map((ms) => ({ userMs: ms, systemMs: 0 })),
    process: { userMs: processMs, systemMs: 0 },
    machine: undefined,
  };
}

describe("what the threads bench prints from its runs", () => {
  it("splits a run's CPU a message over the main thread, each cell thread and the rest", () => {
    const line = cpuLine(run(2, 2, 120, [100, 80], 400));
    expect(line).toContain("40 µs in all");
    expect(line).toContain("main 12 µs (12% of a core)");
    expect(line).toContain("cell thread 0 10 µs (10% of a core)");
    expect(line).toContain("cell thread 1 8 µs (8% of a core)");
    expect(line).toContain("other threads 10 µs (10% of a core)");
  });

  it("projects each placement's ceiling from the main thread's CPU a message", () => {
    const runs = [run(1, 0, 200, [], 250, 25_000), run(1, 1, 150, [300], 500, 12_500), run(4, 0, 160, [], 200), run(4, 2, 125, [175, 175], 450)];
    const text = outlookLines(runs, 2).join("\n");
    // Unthreaded: 16 µs a message on main; threaded: 12.5 µs on main and 35 between the cell threads.
    expect(text).toContain("the aggregate stays under 62,500 msg/s");
    expect(text).toContain("caps the aggregate at 80,000 msg/s, reached with about 3 busy cell threads");
    expect(text).toContain("expect up to about 1.3× the unthreaded aggregate");
    // One send of 100 as its producer waits: 100 / 25,000 s against 100 / 12,500 s.
    expect(text).toContain("took 4.00 ms unthreaded and 8.00 ms on a cell thread");
  });

  it("projects the ceilings from the runs with the most calls in flight, the call's time from the sequential ones", () => {
    const runs = [
      run(4, 0, 160, [], 200, 20_000, 1),
      run(4, 2, 125, [175, 175], 450, 20_000, 1),
      run(4, 0, 100, [], 200, 20_000, 4),
      run(4, 2, 50, [100, 100], 300, 20_000, 4),
      run(1, 0, 200, [], 250, 25_000, 1),
      run(1, 1, 150, [300], 500, 12_500, 1),
      run(1, 0, 200, [], 250, 50_000, 4),
      run(1, 1, 150, [300], 500, 50_000, 4),
    ];
    const text = outlookLines(runs, 2).join("\n");
    expect(text).toContain("unthreaded, 4 queues, 4 calls in flight each way a queue: the main thread spends 10.00 µs");
    expect(text).toContain("caps the aggregate at 200,000 msg/s");
    expect(text).toContain("took 4.00 ms unthreaded and 8.00 ms on a cell thread");
  });
});
