/**
 * V8 flags reach workerd although Miniflare has no option for them: the config bytes gain a
 * v8Flags list that Cap'n Proto readers see, the rest of the message is unchanged, and a flag
 * takes effect inside a real workerd.
 */
import { serializeConfig } from "miniflare";
import { describe, expect, test } from "vitest";
import { readV8Flags, withV8Flags, WorkerdConfigError } from "../src/workerd/workerd-config-v8-flags.ts";
import { runHost, tidyAfterEach } from "../../../test/host-harness.ts";

/** A config as Miniflare serializes it (always in one segment). */
function config(moduleBytes = 100, v8Flags?: string[]): Buffer {
  return serializeConfig({
    services: [
      {
        name: "main",
        worker: {
          modules: [{ name: "index.js", esModule: `export default { fetch: () => new Response("ok") };\n//${"x".repeat(moduleBytes)}` }],
          compatibilityDate: "2025-09-01",
        },
      },
    ],
    sockets: [{ name: "http", address: "127.0.0.1:0", http: {}, service: { name: "main" } }],
    ...(v8Flags === undefined ? {} : { v8Flags }),
  });
}

describe("withV8Flags", () => {
  test("reads flags Miniflare's own encoder wrote, and none where it wrote none", () => {
    expect(readV8Flags(config(100, ["--expose-gc", "--max-semi-space-size=2"]))).toEqual(["--expose-gc", "--max-semi-space-size=2"]);
    expect(readV8Flags(config())).toEqual([]);
  });

  test("adds the flags, leaving every other byte where a reader finds it", () => {
    for (const before of [config(100), config(200_000), withSecondSegment(config(100))]) {
      const flags = ["--max-semi-space-size=2", "--stack-size=900", "-x"];
      const after = withV8Flags(before, flags);
      expect(readV8Flags(after)).toEqual(flags);
      const segments = new DataView(before.buffer, before.byteOffset).getUint32(0, true) + 1;
      // Header (first segment's size grows), then the first segment with the flags appended,
      // then the other segments unchanged.
      const header = Math.ceil((4 + 4 * segments) / 8) * 8;
      const firstWords = new DataView(before.buffer, before.byteOffset).getUint32(4, true);
      const added = after.length - before.length;
      expect(new DataView(after.buffer, after.byteOffset).getUint32(4, true)).toBe(firstWords + added / 8);
      expect(Buffer.from(after.subarray(8, header))).toEqual(before.subarray(8, header));
      const seg0End = header + firstWords * 8;
      // The first segment changes only in the v8Flags slot (one word).
      const changed = [...before.subarray(header, seg0End)].flatMap((b, i) => (after[header + i] === b ? [] : [Math.floor(i / 8)]));
      expect(new Set(changed).size).toBe(1);
      expect(Buffer.from(after.subarray(seg0End + added))).toEqual(before.subarray(seg0End));
    }
  });

  test("returns the message itself when there are no flags", () => {
    const before = config();
    expect(withV8Flags(before, [])).toBe(before);
  });

  test("refuses an empty flag, a NUL, a config that sets v8Flags already, and bytes that are not a message", () => {
    expect(() => withV8Flags(config(), [""])).toThrow(WorkerdConfigError);
    expect(() => withV8Flags(config(), ["--a\0b"])).toThrow(/without NUL/);
    expect(() => withV8Flags(config(100, ["--expose-gc"]), ["--expose-gc"])).toThrow("already sets v8Flags");
    expect(() => withV8Flags(new Uint8Array(3), ["--expose-gc"])).toThrow("too short");
    const truncated = config().subarray(0, 40);
    expect(() => withV8Flags(truncated, ["--expose-gc"])).toThrow(/bytes but its frame header says/);
  });
});

/**
 * `message` with a second segment of 3 words: Miniflare writes one segment, but a Cap'n Proto
 * writer may write more, and pointers in the first must still reach them.
 */
function withSecondSegment(message: Buffer): Buffer {
  const view = new DataView(message.buffer, message.byteOffset);
  if (view.getUint32(0, true) !== 0) throw new Error("expected one segment");
  const firstWords = view.getUint32(4, true);
  const header = Buffer.alloc(16);
  header.writeUInt32LE(1, 0);
  header.writeUInt32LE(firstWords, 4);
  header.writeUInt32LE(3, 8);
  const second = Buffer.from(Array.from({ length: 24 }, (_, i) => i + 1));
  return Buffer.concat([header, message.subarray(8), second]);
}

describe("a host's workerd", () => {
  const tidy = tidyAfterEach();

  const worker = `export default { fetch: () => new Response(typeof gc) };\n`;
  const wrangler = `name = "gc"\nmain = "index.js"\ncompatibility_date = "2025-09-01"\n`;

  // One after another: the flags are process-wide and taken as each workerd starts.
  test("runs with the flags the host was given, and without them when given none", async () => {
    for (const [flags, seen] of [
      [["--expose-gc"], "function"],
      [[], "undefined"],
    ] as const) {
      const p = tidy.project();
      const configPath = p.write({ "wrangler.toml": wrangler, "index.js": worker });
      const running = await runHost([configPath], p.dataDir, { workerdV8Flags: flags });
      try {
        expect(await (await running.fetch("/")).text()).toBe(seen);
      } finally {
        await running.close();
      }
    }
  });
});
