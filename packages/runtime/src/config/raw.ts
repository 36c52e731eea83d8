/**
 * Lenient reads of a config file's data before (or despite) schema validation. The deployment
 * rules use them so that a file with one bad value still gets its cross-file checks, and the user
 * sees every problem in one run instead of one layer at a time.
 */

export type RawTable = Record<string, unknown>;

export function isPlainObject(value: unknown): value is RawTable {
  // TOML dates are objects too, but never tables.
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/** `table[key]` when it is a non-empty string. */
export function rawString(table: unknown, key: string): string | undefined {
  const value = isPlainObject(table) ? table[key] : undefined;
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** The tables in the array at `table.a.b...`, with their indexes in that array. */
export function rawEntries(table: unknown, keys: string[]): { index: number; entry: RawTable }[] {
  let value: unknown = table;
  for (const key of keys) value = isPlainObject(value) ? value[key] : undefined;
  if (!Array.isArray(value)) return [];
  return value.flatMap((entry, index) => (isPlainObject(entry) ? [{ index, entry }] : []));
}
