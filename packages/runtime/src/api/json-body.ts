import { apiLimits } from "./api-limits.ts";
import { ApiError } from "./errors.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });

interface Frame {
  array: boolean;
  /** Items (arrays) or members (objects) seen so far. */
  items: number;
  /** The current member's name (objects). */
  key: string;
}

/**
 * Checks nesting depth, array lengths and object members before JSON.parse builds anything, so a
 * hostile body costs one linear pass and no allocation. The error names the path where the bound
 * was broken. Syntax is left to JSON.parse; this pass only needs to find brackets outside strings.
 */
export function checkJsonShape(
  text: string,
  limits: { depthMax: number; arrayItemsMax: number; objectMembersMax: number },
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
      stack.push({ array: c === 0x5b, items: 0, key: "" });
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      if (top !== undefined && !top.array) expectKey = true;
    } else if (c !== 0x3a /* : */ && top?.array === true && (prev === 0x5b || prev === 0x2c)) {
      countItem(stack, limits.arrayItemsMax, prefix);
    }
    prev = c;
  }
}

/**
 * UTF-8 bytes to a value, refusing invalid UTF-8, too-deep nesting, too-long arrays and bad JSON.
 * The text comes back too: a send keeps each event's data as written (json-source.ts).
 */
export function parseJsonBody(bytes: Uint8Array): { value: unknown; text: string } {
  if (bytes.byteLength === 0) return { value: {}, text: "{}" };
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new ApiError("malformed_body", "the request body is not valid UTF-8");
  }
  return { value: parseJsonText(text, "the request body"), text };
}

/**
 * A JSON document held in a string (a protobuf text_data with a JSON content type). `why`, after
 * the refusal's words, says what made it JSON where the sender chose that (a Content-Type).
 */
export function parseJsonText(text: string, what: string, field = "", why = ""): unknown {
  checkJsonShape(
    text,
    { depthMax: apiLimits.jsonDepthMax, arrayItemsMax: apiLimits.jsonArrayItemsMax, objectMembersMax: apiLimits.jsonObjectMembersMax },
    field,
  );
  try {
    return JSON.parse(text);
  } catch {
    // V8's parse messages change between Node versions; clients get a stable one.
    throw new ApiError("malformed_body", `${what} is not valid JSON${why}`, { field: field || undefined });
  }
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
