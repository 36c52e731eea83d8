/** Median of several rounds: the machine is shared and noisy, so one round proves little. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function perSecond(count: number, startNs: bigint): number {
  return count / (Number(process.hrtime.bigint() - startNs) / 1e9);
}

export function fmt(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(2);
}

export function ratioLine(label: string, ours: number, baseline: number, target: string, unit = "msg/s"): string {
  const ratio = ours / baseline;
  return `${label}: ${fmt(ours)} ${unit} vs baseline ${fmt(baseline)} ${unit} -> ratio ${ratio.toFixed(2)} (target ${target})`;
}
