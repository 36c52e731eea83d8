import { dataDirAccessWarning } from "./data-dir-access.ts";
import { lockDataDir } from "./data-dir-lock.ts";
import type { HostLog } from "./host-log.ts";
import { checkPortFree } from "./port-check.ts";
import { stopLeftoverWorkerd } from "../workerd/workerd-orphans.ts";

/**
 * The first stage of a start: the data directory locked for this host, a workerd a killed host
 * left on it stopped, and the Workers' port checked free. Returns the unlock; on a failure the
 * directory is unlocked again before the error goes on.
 */
export async function claimDataDir(dataDir: string, listenHost: string, listenPort: number, log: HostLog): Promise<() => void> {
  const unlock = lockDataDir(dataDir);
  try {
    const access = dataDirAccessWarning(dataDir);
    if (access !== undefined) log.warn(access);
    // Before the port check: a workerd left by a host that was killed holds the port it had.
    for (const pid of await stopLeftoverWorkerd(dataDir)) {
      log.warn(`stopped workerd (pid ${pid}), left running by a celld on this data directory that was killed`);
    }
    await checkPortFree(listenHost, listenPort);
    return unlock;
  } catch (error) {
    unlock();
    throw error;
  }
}
