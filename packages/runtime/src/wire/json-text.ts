import { ApiError } from "./api-error.ts";

/**
 * Reading JSON text without parsing it: where a string ends, a member's name, and the names the
 * API gives fields (`events[3].data`). What json-source.ts and the server's body guard
 * (api/json-body.ts) share.
 */

/** `prefix.key`, or `key` at the top level. */
export function fieldPath(prefix: string, key: string): string {
  return prefix === "" ? key : `${prefix}.${key}`;
}

/** The refusal of a member given twice: JSON.parse would silently keep the last. */
export function duplicateMemberError(path: string): ApiError {
  return new ApiError("invalid_argument", `${path} is given twice; a member's name must be unique in its object`, {
    field: path,
    bound: "one member of each name",
  });
}

/** The index of the quote that closes the string opening at `start`. */
export function stringEnd(text: string, start: number): number {
  let i = start + 1;
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote < 0) return text.length - 1;
    let backslashes = 0;
    for (let j = quote - 1; j > start && text.charCodeAt(j) === 0x5c; j--) backslashes++;
    if (backslashes % 2 === 0) return quote;
    i = quote + 1;
  }
}

export function decodeKey(quoted: string): string {
  if (!quoted.includes("\\")) return quoted.slice(1, -1);
  try {
    return JSON.parse(quoted) as string;
  } catch {
    return quoted.slice(1, -1);
  }
}
