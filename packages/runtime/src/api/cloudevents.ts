import assert from "node:assert/strict";
import type { OutgoingMessage } from "@celld/queue-cell";
import { limits } from "@celld/queue-cell/limits";
import { apiLimits } from "./api-limits.ts";
import { ApiError } from "../wire/api-error.ts";
import type { AttributeValue, Attributes, EventEnvelope, Payload } from "../wire/event-envelope.ts";
import { checkString, describe, expectObject } from "./fields.ts";
import { fieldPath } from "../wire/json-text.ts";
import { parseJsonText } from "./json-body.ts";
import { envelopeDataTexts, withMember } from "../wire/json-source.ts";
import { isJsonMediaType, isMediaType, jsonMediaType, mediaEssence, v8MediaType } from "../wire/media-types.ts";
import { protoToParts, type PbCloudEvent } from "../wire/proto-codec.ts";
import { formatMs, formatRfc3339, parseRfc3339 } from "../wire/timestamps.ts";

/**
 * CloudEvents 1.0 in and out of cells. A stored message keeps the event's `data` as its body,
 * with the cell content type a Worker's queue() decodes it by (json, text, bytes, v8), and every
 * other attribute as JSON in `attributes`. A message a Worker sent has no attributes: leasing it
 * over the API synthesizes them.
 */
/** The type a message sent by a Worker carries when it is leased over the API. */
export const workerMessageEventType = "dev.celld.queues.message";

const requiredAttributes = ["specversion", "id", "source", "type"] as const;
const optionalAttributes = ["datacontenttype", "dataschema", "subject", "time"] as const;
const known: ReadonlySet<string> = new Set<string>([...requiredAttributes, ...optionalAttributes]);
const extensionName = new RegExp(`^[a-z0-9]{1,${apiLimits.eventExtensionNameCharsMax}}$`);
const extensionBound = `1 to ${apiLimits.eventExtensionNameCharsMax} lowercase letters or digits`;
const int32Min = -(2 ** 31);
const int32Max = 2 ** 31 - 1;
const absoluteUri = /^[A-Za-z][A-Za-z0-9+.-]*:\S*$/;
const uriReference = /^[^\s\u0000-\u001f\u007f]+$/;
/** What CloudEvents' String type forbids; its URI types are strings too. */
const notInString = /[\p{Cc}\p{Cs}\p{Noncharacter_Code_Point}]/u;
const stringBound = "no control characters (U+0000-U+001F, U+007F-U+009F), noncharacters or unpaired surrogates";
const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const encoder = new TextEncoder();
// A text body comes back as it was sent, a leading byte-order mark included (a CSV from Excel),
// as a Worker's queue() receives it too; JSON text never starts with one.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * A structured-mode JSON CloudEvent, checked attribute by attribute. `dataText` is the source text
 * of its `data` (json-source.ts); without it the data is written anew from the parsed value, whose
 * numbers JSON.parse has already rounded to doubles.
 */
export function eventFromJson(value: unknown, field: string, dataText?: string): EventEnvelope {
  const obj = expectObject(value, field);
  // Own properties, not assignments: a member named "__proto__" (JSON.parse makes it an own one)
  // would otherwise set the prototype and vanish, instead of being refused as an unknown field.
  const raw: Record<string, unknown> = Object.fromEntries(
    Object.keys(obj)
      .filter((key) => key !== "data" && key !== "data_base64")
      .map((key) => [key, obj[key]]),
  );
  const attributes = checkAttributes(raw, field);
  const contentType = attributes["datacontenttype"] as string | undefined;
  const hasData = Object.hasOwn(obj, "data");
  // `data: null` is JSON's null as the data, as the format says; `data_base64: null` can only mean
  // no binary data, like a null attribute.
  if (Object.hasOwn(obj, "data_base64") && obj["data_base64"] !== null) {
    if (hasData) {
      throw new ApiError("invalid_argument", `${field || "the event"} has both data and data_base64; an event carries one`, {
        field: fieldPath(field, "data_base64"),
        bound: "one of data, data_base64",
      });
    }
    return { attributes, payload: { kind: "bytes", bytes: decodeBase64(fieldPath(field, "data_base64"), obj["data_base64"]) } };
  }
  if (!hasData) return { attributes, payload: { kind: "none" } };
  const data = obj["data"];
  // The JSON format reads an event without datacontenttype as application/json.
  if (contentType === undefined || isJsonMediaType(contentType)) {
    return { attributes, payload: { kind: "json", text: dataText ?? JSON.stringify(data) } };
  }
  if (typeof data !== "string") {
    throw new ApiError(
      "invalid_argument",
      `${fieldPath(field, "data")} must be a string when datacontenttype is ${JSON.stringify(contentType)} (not JSON); send binary data as data_base64`,
      { field: fieldPath(field, "data"), bound: "a string" },
    );
  }
  return { attributes, payload: { kind: "text", text: data } };
}

/**
 * The events of the API's envelope, `{"events": [...]}`, whose `events` member is `list`; `text` is
 * the body's JSON text, where each event's data is found as written.
 */
export function eventsFromEnvelope(list: readonly unknown[], text: string | undefined): EventEnvelope[] {
  const dataTexts = text === undefined ? undefined : envelopeDataTexts(text);
  assert(dataTexts === undefined || dataTexts.length === list.length, "the JSON source scan and JSON.parse disagree on events");
  return list.map((event, i) => eventFromJson(event, `events[${i}]`, dataTexts?.[i]));
}

/** A protobuf-format CloudEvent, held to the same rules as a JSON one. */
export function eventFromProto(pb: PbCloudEvent, field: string): EventEnvelope {
  const parts = protoToParts(pb, field);
  for (const name of ["specversion", "id", "source", "type", "data", "data_base64"]) {
    if (Object.hasOwn(pb.attributes ?? {}, name)) {
      throw new ApiError("invalid_argument", `${field}.attributes must not hold ${name}, which has its own field`, {
        field: `${field}.attributes.${name}`,
        bound: "optional and extension attributes only",
      });
    }
  }
  const attributes = checkAttributes(parts.attributes, field);
  const data = parts.data;
  if (data.kind === "none") return { attributes, payload: data };
  if (data.kind === "bytes") return { attributes, payload: data };
  const contentType = attributes["datacontenttype"];
  if (typeof contentType === "string" && isJsonMediaType(contentType)) {
    // Kept as sent, once it is known to be JSON a Worker's queue() can parse.
    parseJsonText(data.text, `${field}.text_data`, { field: `${field}.text_data` });
    return { attributes, payload: { kind: "json", text: data.text } };
  }
  return { attributes, payload: { kind: "text", text: data.text } };
}

/**
 * Checks the attributes of one event, whatever format brought them; returns them in canonical
 * order. Unknown names that cannot be extension attributes are refused as unknown fields.
 * `pathOf` names an attribute in errors: binary mode carries them in headers (`ce-id`).
 */
export function checkAttributes(
  given: Record<string, unknown>,
  field: string,
  pathOf: (name: string) => string = (name) => fieldPath(field, name),
): Attributes {
  // The JSON format reads an attribute given as null as unset; a name that cannot be an attribute
  // is still refused, below.
  const raw = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== null));
  const out: Attributes = {};
  checkRequiredAttributes(raw, pathOf, out);
  checkOptionalAttributes(raw, pathOf, out);
  checkExtensions(given, raw, field, pathOf, out);
  return out;
}

/** specversion, id, source and type, into `out` in that order. */
function checkRequiredAttributes(raw: Record<string, unknown>, pathOf: (name: string) => string, out: Attributes): void {
  const specversion = raw["specversion"];
  if (specversion === undefined) {
    throw new ApiError("invalid_argument", `${pathOf("specversion")} is required`, {
      field: pathOf("specversion"),
      bound: '"1.0"',
    });
  }
  if (specversion !== "1.0") {
    throw new ApiError("invalid_argument", `${pathOf("specversion")} must be "1.0", got ${describe(specversion)}`, {
      field: pathOf("specversion"),
      bound: '"1.0"',
    });
  }
  out["specversion"] = "1.0";
  for (const name of ["id", "source", "type"] as const) {
    const path = pathOf(name);
    if (raw[name] === undefined) {
      throw new ApiError("invalid_argument", `${path} is required`, {
        field: path,
        bound: `1 to ${apiLimits.eventAttributeCharsMax} characters`,
      });
    }
    out[name] = attributeString(path, raw[name], apiLimits.eventAttributeCharsMax);
  }
  if (!uriReference.test(out["source"] as string)) {
    const path = pathOf("source");
    throw invalid(path, "must be a URI-reference (no spaces or control characters)", raw["source"], "a URI-reference");
  }
}

/** datacontenttype, dataschema, subject and time, where given, into `out` in that order. */
function checkOptionalAttributes(raw: Record<string, unknown>, pathOf: (name: string) => string, out: Attributes): void {
  const contentType = raw["datacontenttype"];
  if (contentType !== undefined) {
    const path = pathOf("datacontenttype");
    attributeString(path, contentType, limits.contentTypeCharsMax);
    if (!isMediaType(contentType as string)) {
      throw invalid(path, "must be a media type such as application/json", contentType, "type/subtype[; parameters]");
    }
    out["datacontenttype"] = contentType as string;
  }
  const schema = raw["dataschema"];
  if (schema !== undefined) {
    const path = pathOf("dataschema");
    attributeString(path, schema, apiLimits.eventAttributeCharsMax);
    if (!absoluteUri.test(schema as string)) throw invalid(path, "must be an absolute URI", schema, "an absolute URI");
    out["dataschema"] = schema as string;
  }
  if (raw["subject"] !== undefined) {
    out["subject"] = attributeString(pathOf("subject"), raw["subject"], apiLimits.eventAttributeCharsMax);
  }
  const time = raw["time"];
  if (time !== undefined) {
    const path = pathOf("time");
    const instant = typeof time === "string" ? parseRfc3339(time) : undefined;
    if (instant === undefined) {
      throw invalid(path, "must be an RFC 3339 timestamp such as 2026-01-01T00:00:00Z", time, "an RFC 3339 timestamp");
    }
    // Kept as UTC, so an event reads the same whichever wire format carried it in or out.
    out["time"] = formatRfc3339(instant);
  }
}

/**
 * Every other name of `given`: an extension attribute, into `out` (at most eventExtensionsMax of
 * them), or refused as an unknown field if it cannot be one.
 */
function checkExtensions(
  given: Record<string, unknown>,
  raw: Record<string, unknown>,
  field: string,
  pathOf: (name: string) => string,
  out: Attributes,
): void {
  let extensions = 0;
  for (const name of Object.keys(given)) {
    if (known.has(name)) continue;
    const path = pathOf(name);
    if (!extensionName.test(name) || name === "data") {
      throw new ApiError(
        "unknown_field",
        `unknown field ${path}; a CloudEvent extension attribute is named with ${extensionBound}`,
        { field: path, bound: extensionBound },
      );
    }
    if (raw[name] === undefined) continue;
    extensions += 1;
    if (extensions > apiLimits.eventExtensionsMax) {
      throw new ApiError("out_of_range", `${field || "the event"} has more than ${apiLimits.eventExtensionsMax} extension attributes`, {
        field: field || undefined,
        bound: `at most ${apiLimits.eventExtensionsMax} extension attributes`,
      });
    }
    out[name] = checkExtensionValue(path, raw[name]);
  }
}

/**
 * A String-typed attribute (or a URI, which is one too): bounded, and without the characters the
 * type forbids. Such a value could not travel on as a binary-mode header, nor be taken by another
 * CloudEvents receiver.
 */
function attributeString(path: string, value: unknown, maxChars: number, minChars = 1): string {
  const text = checkString(path, value, maxChars, minChars);
  const found = notInString.exec(text);
  if (found !== null) {
    const codePoint = `U+${found[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
    throw new ApiError(
      "invalid_argument",
      `${path} holds ${codePoint} at index ${found.index}; a CloudEvents attribute string has ${stringBound}, got ${describe(text)}`,
      { field: path, bound: `a string with ${stringBound}` },
    );
  }
  return text;
}

function checkExtensionValue(path: string, value: unknown): AttributeValue {
  if (typeof value === "boolean") return value;
  if (typeof value === "string") return attributeString(path, value, apiLimits.eventAttributeCharsMax, 0);
  if (typeof value === "number" && Number.isInteger(value) && value >= int32Min && value <= int32Max) return value;
  throw invalid(path, "must be a string, a boolean or a 32-bit integer", value, "a string, boolean or 32-bit integer");
}

function decodeBase64(path: string, value: unknown): Uint8Array {
  if (typeof value !== "string" || !base64.test(value)) {
    throw invalid(path, "must be standard base64 (RFC 4648, with padding)", value, "base64");
  }
  const buffer = Buffer.from(value, "base64");
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

function invalid(field: string, what: string, value: unknown, bound: string): ApiError {
  return new ApiError("invalid_argument", `${field} ${what}, got ${describe(value)}`, { field, bound });
}

/**
 * The cell messages for a send, with every size bound checked here so the error names the event
 * (`events[3]`) rather than the cell's view of it. The cell checks the same `limits` again.
 * `field` is the array the events came in (`events`, or `""` for a body that is the array), or
 * null for a body that is the one event.
 */
export function eventsToMessages(events: readonly EventEnvelope[], field: string | null): OutgoingMessage[] {
  let total = 0;
  const messages = events.map((event, i) => {
    const message = eventToMessage(event);
    const bytes = message.body.byteLength + Buffer.byteLength(message.attributes ?? "");
    if (bytes > limits.messageBytesMax) {
      const path = field === null ? undefined : `${field}[${i}]`;
      throw new ApiError(
        "message_too_large",
        `${path ?? "the event"} is ${bytes} bytes (data plus attributes); a message may be at most ${limits.messageBytesMax} bytes`,
        { field: path, bound: `at most ${limits.messageBytesMax} bytes` },
      );
    }
    total += bytes;
    return message;
  });
  if (total > limits.batchBytesMax) {
    throw new ApiError(
      "batch_too_large",
      `the events of one call are ${total} bytes together (data plus attributes); the bound is ${limits.batchBytesMax} bytes`,
      { field: field || undefined, bound: `at most ${limits.batchBytesMax} bytes` },
    );
  }
  return messages;
}

export function eventToMessage(event: EventEnvelope): OutgoingMessage {
  const attributes = JSON.stringify(event.attributes);
  const payload = event.payload;
  switch (payload.kind) {
    case "json":
      return { body: encoder.encode(payload.text), contentType: "json", attributes };
    case "text":
      return { body: encoder.encode(payload.text), contentType: "text", attributes };
    case "bytes": {
      // A v8 body sent back in (a Worker's message moved elsewhere) stays v8 for the next Worker.
      const ct = event.attributes["datacontenttype"];
      const v8 = typeof ct === "string" && mediaEssence(ct) === v8MediaType;
      return { body: payload.bytes, contentType: v8 ? "v8" : "bytes", attributes };
    }
    case "none":
      return { body: new Uint8Array(0), contentType: "bytes", attributes };
  }
}

export interface StoredEvent {
  id: string;
  contentType: string;
  attributes: string | null;
  body: Uint8Array;
  sentAt: number;
}

const workerContentTypes: Record<string, string> = {
  json: jsonMediaType,
  text: "text/plain",
  bytes: "application/octet-stream",
  v8: v8MediaType,
};

/**
 * The event a stored message stands for. `source` names the queue, for messages a Worker sent,
 * which carry no CloudEvent attributes of their own.
 */
export function eventFromStored(message: StoredEvent, source: string): EventEnvelope {
  if (message.attributes !== null) {
    const attributes = JSON.parse(message.attributes) as Attributes;
    return { attributes, payload: storedPayload(message, false) };
  }
  const attributes: Attributes = {
    specversion: "1.0",
    id: message.id,
    source,
    type: workerMessageEventType,
    datacontenttype: workerContentTypes[message.contentType] ?? "application/octet-stream",
    time: formatMs(message.sentAt),
  };
  const payload = storedPayload(message, true);
  if (payload.kind === "bytes" && message.contentType === "json") attributes["datacontenttype"] = "application/octet-stream";
  return { attributes, payload };
}

function storedPayload(message: StoredEvent, fromWorker: boolean): Payload {
  switch (message.contentType) {
    case "json": {
      const text = decoder.decode(message.body);
      if (!fromWorker) return { kind: "json", text };
      // The API checked its own JSON on the way in; a Worker's is checked on the way out.
      try {
        JSON.parse(text);
        return { kind: "json", text };
      } catch {
        return { kind: "bytes", bytes: message.body };
      }
    }
    case "text":
      return { kind: "text", text: decoder.decode(message.body) };
    default:
      // An event sent with no data is stored as empty bytes.
      return !fromWorker && message.body.byteLength === 0 ? { kind: "none" } : { kind: "bytes", bytes: message.body };
  }
}

/**
 * Structured-mode JSON text: the attributes, then `data` or `data_base64`. JSON data goes in as
 * stored, never parsed and written again, so every number comes back digit for digit.
 */
export function eventToJsonText(event: EventEnvelope): string {
  const attributes = JSON.stringify(event.attributes);
  const payload = event.payload;
  switch (payload.kind) {
    case "none":
      return attributes;
    case "json":
      return withMember(attributes, "data", payload.text);
    case "text":
      return withMember(attributes, "data", JSON.stringify(payload.text));
    case "bytes": {
      const { buffer, byteOffset, byteLength } = payload.bytes;
      return withMember(attributes, "data_base64", JSON.stringify(Buffer.from(buffer, byteOffset, byteLength).toString("base64")));
    }
  }
}
