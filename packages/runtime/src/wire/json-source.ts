import assert from "node:assert/strict";
import { fieldPath } from "./json-text.ts";
import { decodeKey, duplicateMemberError, stringEnd } from "./json-text.ts";

/**
 * An event's JSON `data` as its sender wrote it. JSON.parse reads every number as a double, so a
 * Go uint64 such as 12345678901234567891 would come back from a lease as 12345678901234567000;
 * the API stores the data's source text instead, and writes it into answers without parsing it
 * again. Node 20's JSON.parse cannot say where a value came from, hence this scanner.
 *
 * It runs only on text JSON.parse has accepted, so it checks no syntax and builds no values: it
 * finds members by key and skips everything else, strings by `indexOf`. A name given twice in the
 * envelope or in an event is refused here (RFC 8259 and the CloudEvents JSON format say names
 * SHOULD be unique; JSON.parse would silently keep the last), since a sender who wrote `"id"`
 * twice cannot have meant both. Inside `data` they are kept as written, for the consumer's parser.
 * Whitespace between tokens of the data is dropped, so the data is stored as compactly as
 * JSON.stringify wrote it before; strings and numbers are kept as written.
 */

/** The data of each event of the API's envelope, `{"events": [...]}`; undefined for an event without data. */
export function envelopeDataTexts(text: string): Array<string | undefined> {
  let texts: Array<string | undefined> = [];
  eachMember(text, skipSpace(text, 0), "", (key, at) => {
    if (key !== "events" || text.charCodeAt(at) !== 0x5b /* [ */) return valueEnd(text, at);
    const found: Array<string | undefined> = [];
    const end = eachItem(text, at, (i, itemAt) => eventData(text, itemAt, found, i, `events[${i}]`));
    texts = found;
    return end;
  });
  return texts;
}

/** The data of each event of a JSON batch, `[{...}, ...]` (application/cloudevents-batch+json). */
export function batchDataTexts(text: string): Array<string | undefined> {
  const found: Array<string | undefined> = [];
  const start = skipSpace(text, 0);
  if (text.charCodeAt(start) === 0x5b) eachItem(text, start, (i, at) => eventData(text, at, found, i, `[${i}]`));
  return found;
}

/** The data of one structured-mode event, `{...}` (application/cloudevents+json). */
export function eventDataText(text: string): string | undefined {
  const found: Array<string | undefined> = [];
  eventData(text, skipSpace(text, 0), found, 0, "");
  return found[0];
}

/**
 * The data of each event listed in an answer, `{"<list>": [{…, "event": {…}}, …]}` (a lease's
 * `messages`, a page of `dead_letters`): how a client reads the data as the server wrote it.
 */
export function listedEventDataTexts(text: string, list: string): Array<string | undefined> {
  const found: Array<string | undefined> = [];
  eachMember(text, skipSpace(text, 0), "", (key, at) => {
    if (key !== list || text.charCodeAt(at) !== 0x5b /* [ */) return valueEnd(text, at);
    return eachItem(text, at, (i, itemAt) => {
      found[i] = undefined;
      if (text.charCodeAt(itemAt) !== 0x7b /* { */) return valueEnd(text, itemAt);
      return eachMember(text, itemAt, `${list}[${i}]`, (member, valueAt) =>
        member === "event" ? eventData(text, valueAt, found, i, `${list}[${i}].event`) : valueEnd(text, valueAt),
      );
    });
  });
  return found;
}

/** A whole JSON document (a binary-mode event's body) without whitespace between its tokens. */
export function compactJsonText(text: string): string {
  return compactValue(text, skipSpace(text, 0))[1];
}

/**
 * `objectText` (a JSON object, as JSON.stringify writes one) with one more member whose value is
 * JSON text already written: how an answer carries stored data without parsing it again.
 */
export function withMember(objectText: string, name: string, valueText: string): string {
  assert(objectText.endsWith("}") && objectText.length > 2, "withMember needs a non-empty JSON object");
  return `${objectText.slice(0, -1)},${JSON.stringify(name)}:${valueText}}`;
}

function eventData(text: string, at: number, found: Array<string | undefined>, index: number, field: string): number {
  found[index] = undefined;
  if (text.charCodeAt(at) !== 0x7b /* { */) return valueEnd(text, at);
  return eachMember(text, at, field, (key, valueAt) => {
    if (key !== "data") return valueEnd(text, valueAt);
    const [end, source] = compactValue(text, valueAt);
    found[index] = source;
    return end;
  });
}

/**
 * Calls `visit` with each member's key and where its value starts; `visit` answers where the
 * value ends. Returns the index after the closing brace. A key given twice is refused, named
 * under `field` (the object's own path).
 */
function eachMember(text: string, start: number, field: string, visit: (key: string, at: number) => number): number {
  let i = skipSpace(text, start + 1);
  if (text.charCodeAt(i) === 0x7d /* } */) return i + 1;
  const seen = new Set<string>();
  for (;;) {
    const keyEnd = stringEnd(text, i);
    // Keys are almost never escaped; only an escaped one is worth decoding.
    const raw = text.slice(i + 1, keyEnd);
    const key = raw.includes("\\") ? decodeKey(text.slice(i, keyEnd + 1)) : raw;
    if (seen.has(key)) throw duplicateMemberError(fieldPath(field, key));
    seen.add(key);
    const colon = skipSpace(text, keyEnd + 1);
    i = skipSpace(text, visit(key, skipSpace(text, colon + 1)));
    if (text.charCodeAt(i) === 0x7d) return i + 1;
    i = skipSpace(text, i + 1);
  }
}

function eachItem(text: string, start: number, visit: (index: number, at: number) => number): number {
  let i = skipSpace(text, start + 1);
  if (text.charCodeAt(i) === 0x5d /* ] */) return i + 1;
  for (let index = 0; ; index++) {
    i = skipSpace(text, visit(index, i));
    if (text.charCodeAt(i) === 0x5d) return i + 1;
    i = skipSpace(text, i + 1);
  }
}

/** The index just after the value starting at `at`. */
function valueEnd(text: string, at: number): number {
  const c = text.charCodeAt(at);
  if (c === 0x22 /* " */) return stringEnd(text, at) + 1;
  if (c === 0x7b || c === 0x5b) return compactValue(text, at)[0];
  let i = at + 1;
  while (i < text.length && !endsScalar(text.charCodeAt(i))) i++;
  return i;
}

/** Where the value at `at` ends, and its text without whitespace between tokens. */
function compactValue(text: string, at: number): [number, string] {
  const c = text.charCodeAt(at);
  if (c !== 0x7b && c !== 0x5b) {
    const end = valueEnd(text, at);
    return [end, text.slice(at, end)];
  }
  let depth = 0;
  let out = "";
  let from = at;
  for (let i = at; ; i++) {
    const d = text.charCodeAt(i);
    if (d === 0x22) {
      i = stringEnd(text, i);
    } else if (d === 0x7b || d === 0x5b) {
      depth++;
    } else if (d === 0x7d || d === 0x5d) {
      depth--;
      if (depth === 0) return [i + 1, out + text.slice(from, i + 1)];
    } else if (isSpace(d)) {
      out += text.slice(from, i);
      from = skipSpace(text, i);
      i = from - 1;
    }
  }
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** JSON's whitespace: space, tab, line feed, carriage return. */
function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** A number, true, false or null runs until a comma, a closing bracket or whitespace. */
function endsScalar(c: number): boolean {
  return c === 0x2c || c === 0x7d || c === 0x5d || isSpace(c);
}
