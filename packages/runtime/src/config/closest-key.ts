/**
 * The known name a misspelt one was probably meant to be: for the unknown-key warning, and for
 * the CLI's unknown options and commands. Only a near miss is named: the same name in another
 * case or word separator (`maxBatchSize` for `max_batch_size`), or one edit away (two for names
 * over four characters), counting a swap of neighbouring letters as one edit (`mian` for
 * `main`). With no such name, or two equally near, none.
 */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  const squashed = squash(key);
  const sameWords = known.filter((candidate) => squash(candidate) === squashed);
  if (sameWords.length > 0) return sameWords.length === 1 ? sameWords[0] : undefined;
  const allowed = key.length <= 4 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = allowed + 1;
  let tied = false;
  for (const candidate of known) {
    const distance = editDistance(key, candidate, allowed);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
      tied = false;
    } else if (distance === bestDistance) {
      tied = true;
    }
  }
  return best !== undefined && !tied ? best : undefined;
}

/** Lower case without separators: `maxBatchSize`, `max-batch-size` and `max_batch_size` agree. */
function squash(key: string): string {
  return key.toLowerCase().replace(/[_\-\s]/g, "");
}

/**
 * Edits (insert, delete, replace, swap of neighbours) from `a` to `b`; anything over `limit`
 * comes back as limit + 1, so a long unrelated key costs little.
 */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let beforeLast: number[] = [];
  let last = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(last[j]! + 1, row[j - 1]! + 1, last[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, beforeLast[j - 2]! + 1);
      row.push(d);
      rowMin = Math.min(rowMin, d);
    }
    if (rowMin > limit) return limit + 1;
    beforeLast = last;
    last = row;
  }
  return Math.min(last[b.length]!, limit + 1);
}
