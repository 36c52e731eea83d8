import { loadavg } from "node:os";

/** The machine is shared: how busy it was, so that figures from different runs can be read. */
export function loadLine(cores: number): string {
  const [one, five] = loadavg();
  return `load average ${one!.toFixed(2)} (1 min), ${five!.toFixed(2)} (5 min) on ${cores} cores`;
}
