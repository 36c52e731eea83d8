/**
 * Which of `threads` cell threads owns queue `name`: FNV-1a (32 bits) of its UTF-16 code units,
 * modulo `threads`. Stable across runs and versions, as it must be: two threads that both took a
 * name would both write its file. Only ever one registry's count of threads applies at a time
 * (the data directory's lock keeps a second host out), so a change of count moves names safely.
 */
export function ownerOf(name: string, threads: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % threads;
}
