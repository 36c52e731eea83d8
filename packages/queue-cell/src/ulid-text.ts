// Imports nothing: the queue dispatch Worker, inside workerd, reads ids with this file too.

/** Crockford's base-32 digits, as a ULID is written. */
export const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/** A ULID's text: 10 characters of millisecond time, then 16 of randomness (80 bits). */
export const ulidTimeChars = 10;
export const ulidRandomChars = 16;
const ulidChars = ulidTimeChars + ulidRandomChars;

/**
 * The id a UlidSource gives after `id` within the same millisecond: `id` with its random part (the
 * last 16 characters, a base-32 number in Crockford's upper case) one higher. Undefined when `id`
 * is not 26 characters long, a character read is not such a digit, or the random part is at its
 * top (a source then moves on to the next millisecond). The ids of one send follow one another by
 * this rule, so the store and the batches sent to workerd keep them as the first and a count.
 */
export function ulidSuccessor(id: string): string | undefined {
  if (id.length !== ulidChars) return undefined;
  for (let i = ulidChars - 1; i >= ulidTimeChars; i--) {
    const digit = crockford.indexOf(id[i]!);
    if (digit < 0) return undefined;
    if (digit < 31) return id.slice(0, i) + crockford[digit + 1]! + "0".repeat(ulidChars - 1 - i);
  }
  return undefined;
}

/**
 * Whether each item is `alike` the first and has the ulidSuccessor of the id before it: messages
 * whose ids and shared fields a short pack list or a batch frame's run can stand for.
 */
export function isUlidRun<T extends { id: string }>(items: readonly T[], alike: (item: T, first: T) => boolean): boolean {
  const first = items[0]!;
  for (let i = 1; i < items.length; i++) {
    const item = items[i]!;
    if (!alike(item, first) || item.id !== ulidSuccessor(items[i - 1]!.id)) return false;
  }
  return true;
}

/**
 * `count` ids from `first` on, each the ulidSuccessor of the one before: the ids a short pack list
 * or a batch frame's run stands for. Fewer when they would run past the top (the caller's list is
 * damaged); the length says at which message.
 */
export function ulidRun(first: string, count: number): string[] {
  const ids: string[] = [];
  for (let id: string | undefined = first; id !== undefined && ids.length < count; id = ulidSuccessor(id)) ids.push(id);
  return ids;
}
