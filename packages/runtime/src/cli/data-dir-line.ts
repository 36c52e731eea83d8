/**
 * The start banner's line for the data directory, with its queue files and the space they take:
 * `data directory: /x/.celld (12 queues on disk, 48 MB)`. `unconfigured`: how many of them no
 * config of this deployment names (another environment's, the native API's, a queue since
 * dropped from the config), said so that a count above the queues line below is not a puzzle:
 * their messages are kept, and served again by the config or the API that names them.
 */
export function dataDirLine(dataDir: string, usage: { queues: number; bytes: number }, unconfigured = 0): string {
  if (usage.queues === 0) return `data directory: ${dataDir} (no queues on disk)`;
  const others = unconfigured === 0 ? "" : `; ${unconfigured} of them in no config of this deployment, kept as they are`;
  return `data directory: ${dataDir} (${usage.queues} queue${usage.queues === 1 ? "" : "s"} on disk, ${byteSize(usage.bytes)}${others})`;
}

/** Bytes in decimal units (1 KB = 1000 B, as du -h --si and the limits say), two or three digits. */
function byteSize(bytes: number): string {
  const units = ["KB", "MB", "GB", "TB"];
  if (bytes < 1000) return `${bytes} B`;
  let value = bytes;
  let unit = "B";
  for (const next of units) {
    if (value < 1000) break;
    value /= 1000;
    unit = next;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${unit}`;
}
