import { limits } from "@celld/queue-cell";

/** The variable a unit file or a container sets instead of `--cell-threads` (the flag wins). */
export const cellThreadsVariable = "CELLD_CELL_THREADS";

/**
 * A setting of the command line or the environment that no start could run with. Unlike a
 * UsageError (status 2, printed with the usage), it exits with the config status (78) and its
 * one line: what is wrong is the value, not the shape of the command.
 */
export class SettingError extends Error {
  override readonly name = "SettingError";
}

/**
 * `--cell-threads N`, else CELLD_CELL_THREADS (empty counts as unset, as a variable cleared with
 * `CELLD_CELL_THREADS=` means to be), else 0: the cells on the main thread. Refused, naming the
 * flag or the variable and the bound, before anything starts.
 */
export function cellThreadsOf(flag: string | undefined, processEnv: Readonly<Record<string, string | undefined>>): number {
  const fromVariable = processEnv[cellThreadsVariable];
  const [source, text] =
    flag !== undefined ? ["--cell-threads", flag] : fromVariable !== undefined && fromVariable !== "" ? [cellThreadsVariable, fromVariable] : [];
  if (text === undefined) return 0;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > limits.cellThreadsMax) {
    throw new SettingError(
      `${source} must be a whole number from 0 (cells on the main thread) to ${limits.cellThreadsMax}, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}
