/**
 * The start banner's line for the data directory, with its queue files and the space they take:
 * `data directory: /x/.celld (12 queues on disk, 48 MB)`.
 */
export function dataDirLine(dataDir: string, usage: { queues: number; bytes: number }): string {
  if (usage.queues === 0) return `data directory: ${dataDir} (no queues on disk)`;
  return `data directory: ${dataDir} (${usage.queues} queue${usage.queues === 1 ? "" : "s"} on disk, ${byteSize(usage.bytes)})`;
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
