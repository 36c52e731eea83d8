// Apart from miniflare-v8-flags.ts so that code which must not load Miniflare (the bench's driver)
// can say which flags the host uses.

/**
 * The young generation's semi-spaces capped at 1 MB (V8 grows them to 16 MB or more by default),
 * so each collection frees fewer dead objects at once. In scratch runs of 1,000 send()s a second
 * on a host that had carried 30,000 messages, a send's p99 fell from 24-46 ms to 11-23 ms and an
 * empty request's from 23-42 ms to 7-10; 2 MB gave 16-24 ms, 4 MB 26-38. Throughput and CPU per
 * message did not change measurably. The cost: more short-lived objects reach the old
 * generation, and with 64 MiB of 100 KB bodies held by a stuck consumer workerd peaked at 455 MB
 * against 357 with V8's defaults (2 MB: 313). See docs/performance.md.
 */
export const defaultWorkerdV8Flags: readonly string[] = ["--max-semi-space-size=1"];
