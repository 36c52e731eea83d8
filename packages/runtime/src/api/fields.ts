import { ApiError } from "../wire/api-error.ts";
import { fieldPath } from "../wire/json-text.ts";

/** A parsed JSON object whose members are checked one by one, each error naming its field. */
export type JsonObject = Record<string, unknown>;

export function expectObject(value: unknown, field: string): JsonObject {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ApiError("invalid_argument", `${field || "the request body"} must be a JSON object, got ${describe(value)}`, {
      field: field || undefined,
      bound: "a JSON object",
    });
  }
  return value as JsonObject;
}

/** Unknown members are refused, not ignored: a misspelt `visibilty_timeout` must not pass silently. */
export function refuseUnknown(obj: JsonObject, allowed: ReadonlySet<string>, prefix: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.has(key)) {
      const known = [...allowed].join(", ");
      throw new ApiError("unknown_field", `unknown field ${fieldPath(prefix, key)}; known fields here: ${known}`, {
        field: fieldPath(prefix, key),
        bound: known === "" ? "no fields" : `one of: ${known}`,
      });
    }
  }
}

const noMembers: ReadonlySet<string> = new Set();

/**
 * A request's JSON object: unknown members refused, then null members left out. JSON clients write
 * an optional field they do not set as null (Python's None, Go's nil pointers; proto3's JSON
 * mapping reads null as unset), so null means "not given": an optional field takes its default, a
 * required one is refused as missing. `nullMeans` names the members whose null says something.
 */
export function readObject(
  value: unknown,
  field: string,
  allowed: ReadonlySet<string>,
  nullMeans: ReadonlySet<string> = noMembers,
): JsonObject {
  const obj = expectObject(value, field);
  refuseUnknown(obj, allowed, field);
  // fromEntries defines members: a "__proto__" key stays a member, never a prototype.
  return Object.fromEntries(Object.entries(obj).filter(([key, member]) => member !== null || nullMeans.has(key)));
}

/** A member the request must give; absent and null are both "not given". */
export function requiredMember(obj: JsonObject, key: string, prefix: string, bound: string, hint = ""): unknown {
  const value = obj[key];
  if (value === undefined || value === null) {
    const field = fieldPath(prefix, key);
    throw new ApiError("invalid_argument", `${field} is required${hint}`, { field, bound });
  }
  return value;
}

/**
 * One rule for numbers past what a JSON parser holds exactly: a whole number beyond 2^53 - 1, or
 * one so large it parsed as Infinity (`1` and 400 zeros), is out of range like any other too
 * large a number. The parser has already rounded it (9007199254740993 reads as ...992), so the
 * value is never quoted: the server quotes the text that was sent, which the body's scan kept
 * (json-body.ts, InexactNumberError.quoting), or else the message says how large it is.
 */
export function isPastExact(value: number): boolean {
  return !(Number.isNaN(value) || Number.isSafeInteger(value) || (Number.isFinite(value) && !Number.isInteger(value)));
}

/** A number's text as sent, for a message: whole up to 40 characters, else its start and length. */
export function shownLiteral(literal: string): string {
  return literal.length <= 40 ? literal : `${literal.slice(0, 24)}… (${literal.length} characters)`;
}

/** What a message says of a value past the rule above when its text is not known. */
export function pastExactWords(value: number): string {
  return `${value < 0 ? "a number below -" : "a number past "}${Number.MAX_SAFE_INTEGER} (2^53 - 1), which JSON numbers do not hold exactly`;
}

/** A number refused by the rule above: the server puts the number's text as sent in its message. */
export class InexactNumberError extends ApiError {
  constructor(
    readonly fieldName: string,
    readonly boundText: string,
    negative: boolean,
  ) {
    super("out_of_range", `${fieldName} must be from ${boundText}, got ${pastExactWords(negative ? -1 : 1)}`, { field: fieldName, bound: boundText });
  }

  /** The same refusal quoting `literal`, the number's text in the body (shortened past 40 characters). */
  quoting(literal: string): ApiError {
    return new ApiError("out_of_range", `${this.fieldName} must be from ${this.boundText}, got ${shownLiteral(literal)}`, {
      field: this.fieldName,
      bound: this.boundText,
    });
  }
}

export function checkInt(field: string, value: unknown, min: number, max: number, unit = ""): number {
  const bound = `${min} to ${max}${unit === "" ? "" : ` ${unit}`}`;
  if (typeof value === "number" && isPastExact(value)) throw new InexactNumberError(field, bound, value < 0);
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new ApiError("invalid_argument", `${field} must be a whole number from ${bound}, got ${describe(value)}`, {
      field,
      bound,
    });
  }
  if (value < min || value > max) {
    throw new ApiError("out_of_range", `${field} must be from ${bound}, got ${value}`, { field, bound });
  }
  return value;
}

export function optionalInt(
  obj: JsonObject,
  key: string,
  prefix: string,
  min: number,
  max: number,
  unit = "",
): number | undefined {
  const value = obj[key];
  return value === undefined || value === null ? undefined : checkInt(fieldPath(prefix, key), value, min, max, unit);
}

export function checkString(field: string, value: unknown, maxChars: number, minChars = 1): string {
  const bound = `${minChars} to ${maxChars} characters`;
  if (typeof value !== "string") {
    throw new ApiError("invalid_argument", `${field} must be a string of ${bound}, got ${describe(value)}`, {
      field,
      bound,
    });
  }
  if (value.length < minChars || value.length > maxChars) {
    throw new ApiError("out_of_range", `${field} must be ${bound} long, got ${value.length}`, { field, bound });
  }
  return value;
}

export function checkArray(field: string, value: unknown, min: number, max: number, what: string): unknown[] {
  const bound = `${min} to ${max} ${what}`;
  if (!Array.isArray(value)) {
    throw new ApiError("invalid_argument", `${field} must be an array of ${bound}, got ${describe(value)}`, {
      field,
      bound,
    });
  }
  if (value.length < min || value.length > max) {
    throw new ApiError("out_of_range", `${field} must hold ${bound}, got ${value.length}`, { field, bound });
  }
  return value;
}

/** A short rendering of a refused value for a message; never the whole of a large input. */
export function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return String(value);
}
