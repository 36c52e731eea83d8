import assert from "node:assert/strict";
import type { IncomingMessage } from "node:http";
import { limits } from "@celld/queue-cell/limits";
import { checkAttributes, eventFromJson } from "./cloudevents.ts";
import { type EventEnvelope, type Payload } from "../wire/event-envelope.ts";
import { ApiError } from "../wire/api-error.ts";
import { describe } from "./fields.ts";
import { parseJsonText } from "./json-body.ts";
import { batchDataTexts, compactJsonText, eventDataText } from "../wire/json-source.ts";
import { cloudEventsBatchMediaType, isJsonMediaType, mediaEssence } from "../wire/media-types.ts";
import type { RouteContext } from "./router.ts";

/**
 * CloudEvents' own HTTP binding, which `:send` and `events:publish` take beside the API's
 * envelope, so a CloudEvents SDK can post to a queue as it posts to any CloudEvents receiver:
 * structured mode (`application/cloudevents+json`: the body is one event), batched mode
 * (`application/cloudevents-batch+json`: the body is an array of events), and binary mode, the
 * SDKs' default (attributes in `ce-` headers, the body is the data). http-io.ts tells them apart.
 */

/** Keeps a leading byte-order mark, as text bodies keep it on their way to queue(). */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
/** JSON, as the envelope reads it (json-body.ts): a leading byte-order mark is not part of the document. */
const utf8Json = new TextDecoder("utf-8", { fatal: true });
const eventsBound = `1 to ${limits.batchMessagesMax} events`;
const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i;

/**
 * The events of a body in one of the binding's modes, and the field eventsToMessages names them
 * under: `""` for a batch (`[3]`), null for a body that is the one event.
 */
export function cloudEventsOf(ctx: RouteContext): { events: EventEnvelope[]; field: string | null } {
  switch (ctx.requestFormat) {
    case "cloudevents-structured": {
      const dataText = ctx.bodyText === undefined ? undefined : eventDataText(ctx.bodyText);
      return { events: [eventFromJson(ctx.body, "", dataText)], field: null };
    }
    case "cloudevents-batch":
      return { events: batchEvents(ctx.body, ctx.bodyText), field: "" };
    case "cloudevents-binary":
      return { events: [binaryEvent(ctx.req, ctx.body as Uint8Array)], field: null };
    default:
      assert.fail(`cloudEventsOf called for a ${ctx.requestFormat} body`);
  }
}

function batchEvents(body: unknown, text: string | undefined): EventEnvelope[] {
  if (!Array.isArray(body)) {
    throw new ApiError("invalid_argument", `a ${cloudEventsBatchMediaType} body must be a JSON array of ${eventsBound}, got ${describe(body)}`, {
      bound: eventsBound,
    });
  }
  // The binding allows an empty batch; a send of nothing is refused here as in the envelope.
  if (body.length < 1 || body.length > limits.batchMessagesMax) {
    throw new ApiError("out_of_range", `a ${cloudEventsBatchMediaType} body must hold ${eventsBound}, got ${body.length}`, {
      bound: eventsBound,
    });
  }
  const dataTexts = text === undefined ? undefined : batchDataTexts(text);
  assert(dataTexts === undefined || dataTexts.length === body.length, "the JSON source scan and JSON.parse disagree on the batch");
  return body.map((event, i) => eventFromJson(event, `[${i}]`, dataTexts?.[i]));
}

/** Attributes from `ce-` headers, `datacontenttype` from Content-Type, the body as the data. */
function binaryEvent(req: IncomingMessage, body: Uint8Array): EventEnvelope {
  const raw: Record<string, unknown> = {};
  for (const [header, values] of Object.entries(req.headersDistinct)) {
    if (!header.startsWith("ce-") || values === undefined) continue;
    if (header === "ce-datacontenttype") {
      throw new ApiError("invalid_argument", "a binary-mode event carries its datacontenttype in Content-Type; ce-datacontenttype must not be sent", {
        field: header,
        bound: "Content-Type",
      });
    }
    if (values.length > 1) {
      // Node would join them with ", ", which is no attribute's value.
      throw new ApiError("invalid_argument", `${header} is sent ${values.length} times; an attribute has one value`, {
        field: header,
        bound: "one header",
      });
    }
    raw[header.slice(3)] = decodeHeaderValue(header, values[0]!);
  }
  const contentType = req.headers["content-type"];
  if (contentType !== undefined && contentType !== "") raw["datacontenttype"] = contentType;
  const attributes = checkAttributes(raw, "", (name) => (name === "datacontenttype" ? "Content-Type" : `ce-${name}`));
  return { attributes, payload: binaryPayload(attributes["datacontenttype"] as string | undefined, body) };
}

/**
 * A header value as the binding decodes it: a quoted string unquoted (older senders quote),
 * then one round of percent-decoding, and the bytes must be UTF-8.
 */
function decodeHeaderValue(header: string, value: string): string {
  let text = value;
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"')) text = text.slice(1, -1).replace(/\\(.)/gs, "$1");
  if (!/[%\u0080-\uffff]/.test(text)) return text;
  const bytes = new Uint8Array(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x25 /* % */) {
      const hex = text.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) {
        throw new ApiError("invalid_argument", `${header} has a % not followed by two hex digits: percent-encode a literal % as %25`, {
          field: header,
          bound: "percent-encoded UTF-8",
        });
      }
      bytes[n++] = parseInt(hex, 16);
      i += 2;
    } else {
      // Node reads header bytes as latin1, so raw UTF-8 from a sender that did not encode it
      // arrives here byte for byte, and decodes below like its percent-encoded form.
      assert(c <= 0xff, "a header value holds a character above U+00FF");
      bytes[n++] = c;
    }
  }
  try {
    return utf8.decode(bytes.subarray(0, n));
  } catch {
    throw new ApiError("invalid_argument", `${header} is not UTF-8 once percent-decoded`, { field: header, bound: "percent-encoded UTF-8" });
  }
}

/** JSON stays JSON (kept as written), UTF-8 text is text, anything else is bytes, as data_base64 would be. */
function binaryPayload(contentType: string | undefined, body: Uint8Array): Payload {
  // The binding's event without data is one with an empty body.
  if (body.byteLength === 0) return { kind: "none" };
  if (contentType === undefined) return { kind: "bytes", bytes: body };
  if (isJsonMediaType(contentType)) {
    const text = utf8Body(utf8Json, body, contentType);
    // A sender that meant text or bytes learns why the body was read as JSON at all.
    parseJsonText(text, "the request body", {
      why: `, which its Content-Type "${mediaEssence(contentType)}" says it is (in binary mode the body is the event's data)`,
    });
    return { kind: "json", text: compactJsonText(text) };
  }
  if (isUtf8Text(contentType)) return { kind: "text", text: utf8Body(utf8, body, contentType) };
  return { kind: "bytes", bytes: body };
}

/** `text/*` in UTF-8 (or its ASCII subset); text in another charset is kept as the bytes it is. */
function isUtf8Text(contentType: string): boolean {
  if (!mediaEssence(contentType).startsWith("text/")) return false;
  const declared = charset.exec(contentType)?.[1]?.toLowerCase();
  return declared === undefined || declared === "utf-8" || declared === "utf8" || declared === "us-ascii";
}

function utf8Body(decoder: typeof utf8, body: Uint8Array, contentType: string): string {
  try {
    return decoder.decode(body);
  } catch {
    throw new ApiError("malformed_body", `the request body is ${mediaEssence(contentType)}, but not valid UTF-8`);
  }
}
