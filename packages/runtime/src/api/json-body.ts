import { apiLimits } from "./api-limits.ts";
import { ApiError } from "../wire/api-error.ts";
import { isPastExact } from "./fields.ts";
import { decodeKey, duplicateMemberError, stringEnd } from "../wire/json-text.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });

interface Frame {
  array: boolean;
  /** Items (arrays) or members (objects) seen so far. */
  items: number;
  /** The current member's name (objects). */
  key: string;
  /** Names seen in this object, when members must be unique. */
  names?: Set<string>;
}

/**
 * Checks nesting depth, array lengths and object members before JSON.parse builds anything, so a
 * hostile body costs one linear pass and no allocation. The error names the path where the bound
 * was broken. Syntax is left to JSON.parse; this pass only needs to find brackets outside strings.
 * With `uniqueMembers`, a name given twice in any object is refused too: for bodies that hold no
 * sender's data of their own (an ack, a queue's settings), where the second `"delay"` or
 * `"max_retries"` cannot have been meant alongside the first.
 */
export function checkJsonShape(
  text: string,
  limits: {
    depthMax: number;
    arrayItemsMax: number;
    objectMembersMax: number;
    uniqueMembers?: boolean;
    /** Filled, by field path, with the text of each number JSON.parse will not hold exactly (isPastExact). */
    inexactNumbers?: Map<string, string>;
  },
  prefix = "",
): void {
  const stack: Frame[] = [];
  let expectKey = false;
  // The last character outside a string that was not whitespace: a scalar starts an array item
  // only right after `[` or `,`.
  let prev = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c <= 0x20) continue;
    const top = stack[stack.length - 1];
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i);
      if (expectKey && top !== undefined && !top.array) {
        top.key = decodeKey(text.slice(i, end + 1));
        expectKey = false;
        countMember(stack, limits.objectMembersMax, prefix);
        if (top.names !== undefined) {
          if (top.names.has(top.key)) throw duplicateMemberError(joinPath(prefix, pathOf(stack)));
          top.names.add(top.key);
        }
      } else if (top?.array === true) {
        countItem(stack, limits.arrayItemsMax, prefix);
      }
      i = end;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (top?.array === true) countItem(stack, limits.arrayItemsMax, prefix);
      if (stack.length >= limits.depthMax) {
        const path = joinPath(prefix, pathOf(stack));
        throw new ApiError(
          "out_of_range",
          `the JSON at ${path || "the top level"} is nested more than ${limits.depthMax} levels deep`,
          { field: path || undefined, bound: `at most ${limits.depthMax} levels of nesting` },
        );
      }
      stack.push(c === 0x7b && limits.uniqueMembers === true ? { array: false, items: 0, key: "", names: new Set() } : { array: c === 0x5b, items: 0, key: "" });
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      if (top !== undefined && !top.array) expectKey = true;
    } else if (c !== 0x3a /* : */) {
      if (top?.array === true && (prev === 0x5b || prev === 0x2c)) countItem(stack, limits.arrayItemsMax, prefix);
      if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
        // A number, read whole: an error about it quotes what was sent, not what JSON.parse made of it.
        const end = numberEnd(text, i);
        const literal = text.slice(i, end);
        if (limits.inexactNumbers !== undefined && isPastExact(Number(literal))) {
          limits.inexactNumbers.set(joinPath(prefix, pathOf(stack)), literal);
        }
        i = end - 1;
      }
    }
    prev = c;
  }
}

/** How parseJsonText names what it reads, and whether it refuses a member given twice (checkJsonShape). */
export interface JsonTextOptions {
  /** The field the text sits in, for error paths; "" for a whole body. */
  field?: string;
  /** Said after the refusal's words: what made it JSON, where the sender chose that (a Content-Type). */
  why?: string;
  uniqueMembers?: boolean;
  /** Filled with the text of each number past what JSON.parse holds exactly, by field path. */
  inexactNumbers?: Map<string, string>;
}

/**
 * UTF-8 bytes to a value, refusing invalid UTF-8, too-deep nesting, too-long arrays and bad JSON.
 * The text comes back too: a send keeps each event's data as written (json-source.ts).
 */
export function parseJsonBody(
  bytes: Uint8Array,
  options: { uniqueMembers?: boolean } = {},
): { value: unknown; text: string; inexactNumbers: ReadonlyMap<string, string> } {
  const inexactNumbers = new Map<string, string>();
  if (bytes.byteLength === 0) return { value: {}, text: "{}", inexactNumbers };
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new ApiError("malformed_body", "the request body is not valid UTF-8");
  }
  return { value: parseJsonText(text, "the request body", { ...options, inexactNumbers }), text, inexactNumbers };
}

/** A JSON document held in a string: a request's body, or a protobuf text_data with a JSON content type. */
export function parseJsonText(
  text: string,
  what: string,
  { field = "", why = "", uniqueMembers = false, inexactNumbers }: JsonTextOptions = {},
): unknown {
  checkJsonShape(
    text,
    {
      depthMax: apiLimits.jsonDepthMax,
      arrayItemsMax: apiLimits.jsonArrayItemsMax,
      objectMembersMax: apiLimits.jsonObjectMembersMax,
      uniqueMembers,
      ...(inexactNumbers === undefined ? {} : { inexactNumbers }),
    },
    field,
  );
  try {
    return JSON.parse(text);
  } catch {
    // V8's parse messages change between Node versions; clients get a stable one.
    throw new ApiError("malformed_body", `${what} is not valid JSON${why}`, { field: field || undefined });
  }
}

/** Where the number token starting at `start` ends (JSON.parse checks its syntax). */
function numberEnd(text: string, start: number): number {
  let i = start + 1;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const part = (c >= 0x30 && c <= 0x39) || c === 0x2e /* . */ || c === 0x65 /* e */ || c === 0x45 /* E */ || c === 0x2b /* + */ || c === 0x2d; /* - */
    if (!part) break;
  }
  return i;
}

function countItem(stack: Frame[], max: number, prefix: string): void {
  countIn(stack, max, prefix, "array", "items");
}

function countMember(stack: Frame[], max: number, prefix: string): void {
  countIn(stack, max, prefix, "object", "members");
}

function countIn(stack: Frame[], max: number, prefix: string, kind: "array" | "object", unit: "items" | "members"): void {
  const top = stack[stack.length - 1]!;
  top.items += 1;
  if (top.items > max) {
    // The parent frame's key or index names the array or object itself.
    const path = joinPath(prefix, pathOf(stack.slice(0, -1))) || "the top level";
    throw new ApiError("out_of_range", `the JSON ${kind} at ${path} has more than ${max} ${unit}`, {
      field: path,
      bound: `at most ${max} ${unit}`,
    });
  }
}

/** `events[3].data.items`, the way the API names fields everywhere. */
function pathOf(stack: readonly Frame[]): string {
  let path = "";
  for (const frame of stack) {
    if (frame.array) path += `[${Math.max(0, frame.items - 1)}]`;
    else if (frame.key !== "") path += path === "" ? frame.key : `.${frame.key}`;
  }
  return path;
}

function joinPath(prefix: string, path: string): string {
  if (prefix === "") return path;
  if (path === "") return prefix;
  return path.startsWith("[") ? prefix + path : `${prefix}.${path}`;
}
