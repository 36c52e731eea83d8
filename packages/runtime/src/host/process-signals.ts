/**
 * The host's part in the stop signals its caller (`celld dev`) handles. A Ctrl-C reaches celld and
 * workerd at once (one process group), and a batch running then is handed back uncounted only if
 * celld's stop has begun before anything else reacts to workerd's end.
 */

/** The signals Miniflare's exit hook listens to. */
const miniflareSignals = ["SIGINT", "SIGTERM"] as const;

/**
 * Runs `make` (`new Miniflare(...)`) and takes off the SIGINT and SIGTERM listeners it added:
 * Miniflare's exit hook, which kills workerd and exits the process at once (status 130, 143), so
 * that running batches are neither finished nor handed back and come back counted once their
 * lease expires. Taken off before anything else runs, the signals stay the caller's while the
 * Workers start and the consumers' first batches run. Its "exit" listener stays: it still stops
 * workerd if the process exits abruptly. Miniflare adds the hook again with each instance made
 * after the last was disposed (a restart).
 */
export function withoutMiniflareSignalListeners<T>(make: () => T): T {
  const before = new Map(miniflareSignals.map((signal) => [signal, process.listeners(signal)]));
  const made = make();
  for (const signal of miniflareSignals) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)!.includes(listener)) process.removeListener(signal, listener);
    }
  }
  return made;
}

/** How long a signal another thread of the process took may take to reach the event loop. */
const signalHandoffMs = 50;

/**
 * Resolves once Node has run the listeners of any signal the process has already been sent. When
 * a Ctrl-C ends workerd before celld has run (a busy machine), celld finds workerd's pipes closed
 * in the same poll of the event loop that finds its own SIGINT, or one poll earlier (the signal's
 * handler runs as the poll returns), and libuv runs signal listeners after a poll's other events.
 * Whatever reacts to workerd's end waits this long first, so that it finds the stop under way, as
 * the Ctrl-C asked, rather than a crash. An immediate runs after the current poll, and one it
 * queues after the next; the timer before them covers a signal that a thread other than the main
 * one caught, which writes it to the loop a moment later.
 */
export async function afterPendingSignals(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, signalHandoffMs));
  await new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}
