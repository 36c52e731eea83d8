import type { AttributeValue, EventEnvelope, Payload } from "../wire/event-envelope.ts";
import { isJsonMediaType, jsonMediaType } from "../wire/media-types.ts";
import { envelopeToProto, protoToParts, type PbCloudEvent } from "../wire/proto-codec.ts";

/**
 * A CloudEvent as the client hands it to you and takes it from you, the same whichever wire
 * format carried it. `data` is a JSON value when the event is JSON (datacontenttype absent or a
 * JSON type), a string for other text types, and a Uint8Array for binary data.
 */
export interface CloudEvent {
  specversion: "1.0";
  id: string;
  source: string;
  type: string;
  datacontenttype?: string;
  dataschema?: string;
  subject?: string;
  time?: string;
  data?: unknown;
  /** Extension attributes: lowercase names, string / boolean / 32-bit integer values. */
  [extension: string]: unknown;
}

/** What send and publish take: a CloudEvent whose specversion defaults to "1.0". */
export type EventInput = Omit<CloudEvent, "specversion"> & { specversion?: "1.0" };

/** Structured-mode JSON: binary data travels as data_base64. */
export function eventToJsonWire(event: EventInput): Record<string, unknown> {
  const { data, ...attributes } = event;
  const out: Record<string, unknown> = { specversion: "1.0", ...attributes };
  if (data instanceof Uint8Array) out["data_base64"] = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("base64");
  else if (data !== undefined) out["data"] = data;
  return out;
}

/** How a JSON event's data text becomes `data`: JSON.parse unless the client was given another. */
export type JsonDataParser = (text: string) => unknown;

/**
 * `dataText` is the event's data as the answer wrote it, given when the client has its own
 * parser: the whole answer was parsed with JSON.parse, which has already rounded big integers.
 */
export function eventFromJsonWire(wire: Record<string, unknown>, dataText?: string, parse?: JsonDataParser): CloudEvent {
  const { data_base64: base64, ...rest } = wire;
  const event = rest as CloudEvent;
  if (typeof base64 === "string") {
    const bytes = Buffer.from(base64, "base64");
    event.data = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  } else if (parse !== undefined && dataText !== undefined && isJsonData(event.datacontenttype)) {
    event.data = parse(dataText);
  }
  return event;
}

function isJsonData(contentType: unknown): boolean {
  return contentType === undefined || (typeof contentType === "string" && isJsonMediaType(contentType));
}

export function eventToProtoWire(event: EventInput): PbCloudEvent {
  const { data, ...rest } = event;
  const attributes: Record<string, AttributeValue> = { specversion: "1.0" };
  for (const [name, value] of Object.entries(rest)) {
    // null is unset, as the JSON wire reads it: the same event must not fail in one format only.
    if (value === undefined || value === null) continue;
    if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
      throw new TypeError(`CloudEvent attribute ${name} must be a string, number or boolean`);
    }
    attributes[name] = value;
  }
  const contentType = typeof attributes["datacontenttype"] === "string" ? attributes["datacontenttype"] : undefined;
  let payload: Payload;
  if (data === undefined) payload = { kind: "none" };
  else if (data instanceof Uint8Array) payload = { kind: "bytes", bytes: data };
  else if (contentType !== undefined && !isJsonMediaType(contentType)) {
    if (typeof data !== "string") throw new TypeError(`data must be a string or a Uint8Array when datacontenttype is ${contentType}`);
    payload = { kind: "text", text: data };
  } else {
    attributes["datacontenttype"] ??= jsonMediaType;
    payload = { kind: "json", text: JSON.stringify(data) };
  }
  const envelope: EventEnvelope = { attributes, payload };
  return envelopeToProto(envelope);
}

export function eventFromProtoWire(pb: PbCloudEvent, parse: JsonDataParser = JSON.parse): CloudEvent {
  const parts = protoToParts(pb);
  const event = {} as CloudEvent;
  for (const [name, value] of Object.entries(parts.attributes)) if (value !== undefined) event[name] = value;
  const contentType = event.datacontenttype;
  if (parts.data.kind === "bytes") event.data = parts.data.bytes;
  else if (parts.data.kind === "text") {
    event.data = contentType !== undefined && isJsonMediaType(contentType) ? parse(parts.data.text) : parts.data.text;
  }
  return event;
}
