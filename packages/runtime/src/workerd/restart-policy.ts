/**
 * When a workerd that exited under the host is started again, and when the host gives up.
 *
 * Each exit waits a little longer than the one before it in the window (250 ms, 500 ms, 1 s,
 * 2 s): one crash costs a quarter of a second of downtime, and a workerd that dies as it starts
 * is not restarted in a tight loop. The fifth exit within a minute stops the host instead: what
 * kills workerd that often (a Worker that crashes it at load, a machine out of memory or of file
 * descriptors) is not mended by starting it again, and a process supervisor (systemd) or an
 * operator should see it. A failed restart counts as an exit.
 */
export interface RestartPolicySettings {
  /** Exits within `windowMs` that stop the host: the last one is not restarted. */
  exitsMax: number;
  windowMs: number;
  /** The wait before the first restart in the window; each next one doubles it. */
  firstDelayMs: number;
}

export const defaultRestartPolicy: RestartPolicySettings = { exitsMax: 5, windowMs: 60_000, firstDelayMs: 250 };

export type RestartDecision =
  | { restart: true; delayMs: number; exitsInWindow: number }
  | { restart: false; exitsInWindow: number; windowMs: number };

export class RestartPolicy {
  /** When the exits still in the window happened, oldest first. */
  private readonly exits: number[] = [];

  constructor(private readonly settings: RestartPolicySettings = defaultRestartPolicy) {
    if (settings.exitsMax < 1 || settings.windowMs <= 0 || settings.firstDelayMs < 0) {
      throw new RangeError(`restart policy out of range: ${JSON.stringify(settings)}`);
    }
  }

  /** Records an exit at `nowMs` and says what to do about it. */
  exited(nowMs: number): RestartDecision {
    const { exitsMax, windowMs, firstDelayMs } = this.settings;
    while (this.exits.length > 0 && this.exits[0]! <= nowMs - windowMs) this.exits.shift();
    this.exits.push(nowMs);
    const exitsInWindow = this.exits.length;
    if (exitsInWindow >= exitsMax) return { restart: false, exitsInWindow, windowMs };
    return { restart: true, delayMs: firstDelayMs * 2 ** (exitsInWindow - 1), exitsInWindow };
  }
}
