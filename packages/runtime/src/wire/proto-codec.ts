import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import type { AttributeValue, EventEnvelope } from "./event-envelope.ts";
import { ApiError } from "./api-error.ts";
import { jsonMediaType } from "./media-types.ts";
import { formatRfc3339, parseRfc3339, type Instant } from "./timestamps.ts";

/**
 * The protobuf wire format of send, lease, ack and nack (`queues.proto`), shared by the server
 * and the client. Field names stay as the schema spells them (keepCase), the same as the JSON.
 */
const root = new protobuf.Root().loadSync(fileURLToPath(new URL("./queues.proto", import.meta.url)), { keepCase: true });
root.resolveAll();

const types = {
  SendRequest: root.lookupType("celld.queues.v1.SendRequest"),
  SendResponse: root.lookupType("celld.queues.v1.SendResponse"),
  LeaseRequest: root.lookupType("celld.queues.v1.LeaseRequest"),
  LeaseResponse: root.lookupType("celld.queues.v1.LeaseResponse"),
  AckRequest: root.lookupType("celld.queues.v1.AckRequest"),
  NackRequest: root.lookupType("celld.queues.v1.NackRequest"),
  SettleResponse: root.lookupType("celld.queues.v1.SettleResponse"),
} as const;

export type ProtoTypeName = keyof typeof types;

/** What protobufjs hands back for an int64/uint64 when the `long` package is present. */
interface LongLike {
  toNumber(): number;
}
export type PbInt64 = number | LongLike;

export interface PbTimestamp {
  seconds: PbInt64;
  nanos: number;
}

export interface PbAttributeValue {
  attr?: string;
  ce_boolean?: boolean;
  ce_integer?: number;
  ce_string?: string;
  ce_bytes?: Uint8Array;
  ce_uri?: string;
  ce_uri_ref?: string;
  ce_timestamp?: PbTimestamp;
}

export interface PbCloudEvent {
  id: string;
  source: string;
  spec_version: string;
  type: string;
  attributes: Record<string, PbAttributeValue>;
  /** Which member of the `data` oneof is set, on a decoded message. */
  data?: "binary_data" | "text_data" | "proto_data";
  binary_data?: Uint8Array;
  text_data?: string;
}

export interface PbLeaseRef {
  id: string;
  lease_generation: PbInt64;
  delay?: number | null;
}

export interface PbSendRequest {
  events: PbCloudEvent[];
  delay?: number | null;
}
export interface PbSendResponse {
  message_ids: string[];
}
export interface PbLeaseRequest {
  max_messages?: number | null;
  visibility_timeout?: number | null;
  wait?: number | null;
}
export interface PbLeasedMessage {
  id: string;
  lease_generation: PbInt64;
  delivery_count: number;
  lease_expire_time: PbTimestamp;
  send_time: PbTimestamp;
  event: PbCloudEvent;
}
export interface PbLeaseResponse {
  messages: PbLeasedMessage[];
}
export interface PbAckRequest {
  messages: PbLeaseRef[];
}
export interface PbNackRequest {
  messages: PbLeaseRef[];
  delay?: number | null;
}
export interface PbSettleResponse {
  acked: number;
  retried: number;
  dead_lettered: number;
  stale_leases: PbLeaseRef[];
}

interface PbTypes {
  SendRequest: PbSendRequest;
  SendResponse: PbSendResponse;
  LeaseRequest: PbLeaseRequest;
  LeaseResponse: PbLeaseResponse;
  AckRequest: PbAckRequest;
  NackRequest: PbNackRequest;
  SettleResponse: PbSettleResponse;
}

export function encodeProto<N extends ProtoTypeName>(name: N, value: PbTypes[N]): Uint8Array {
  return types[name].encode(value as unknown as Record<string, unknown>).finish();
}

/** Throws a plain Error on bytes that are not a `name` message; callers say so in their own words. */
export function decodeProto<N extends ProtoTypeName>(name: N, bytes: Uint8Array): PbTypes[N] {
  return types[name].decode(bytes) as unknown as PbTypes[N];
}

export function int64ToNumber(value: PbInt64 | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return typeof value === "number" ? value : value.toNumber();
}

export function timestampToInstant(ts: PbTimestamp | null | undefined): Instant | undefined {
  if (ts === null || ts === undefined) return undefined;
  return { seconds: int64ToNumber(ts.seconds), nanos: ts.nanos ?? 0 };
}

/** An event as the protobuf format carries it: core attributes in fields, the rest in the map. */
export function envelopeToProto(event: EventEnvelope): PbCloudEvent {
  const a = event.attributes;
  const attributes: Record<string, PbAttributeValue> = {};
  for (const [name, value] of Object.entries(a)) {
    if (name === "specversion" || name === "id" || name === "source" || name === "type") continue;
    attributes[name] = attributeToProto(name, value);
  }
  const out: PbCloudEvent = {
    id: String(a["id"]),
    source: String(a["source"]),
    spec_version: String(a["specversion"]),
    type: String(a["type"]),
    attributes,
  };
  const payload = event.payload;
  // The JSON format implies application/json when datacontenttype is absent; protobuf has no
  // such default, so JSON text must say what it is.
  if (payload.kind === "json" && a["datacontenttype"] === undefined) attributes["datacontenttype"] = { ce_string: jsonMediaType };
  if (payload.kind === "json" || payload.kind === "text") out.text_data = payload.text;
  else if (payload.kind === "bytes") out.binary_data = payload.bytes;
  return out;
}

function attributeToProto(name: string, value: AttributeValue): PbAttributeValue {
  if (typeof value === "boolean") return { ce_boolean: value };
  if (typeof value === "number") return { ce_integer: value };
  if (name === "time") {
    const instant = parseRfc3339(value);
    if (instant !== undefined) return { ce_timestamp: { seconds: instant.seconds, nanos: instant.nanos } };
  }
  if (name === "dataschema") return { ce_uri: value };
  return { ce_string: value };
}

/** The raw attributes (not yet checked) and data of a decoded protobuf event. */
export function protoToParts(pb: PbCloudEvent, field = ""): {
  attributes: Record<string, unknown>;
  data: { kind: "none" } | { kind: "text"; text: string } | { kind: "bytes"; bytes: Uint8Array };
} {
  // Own properties, not assignments: a map key "__proto__" is refused as an unknown attribute
  // rather than setting the prototype.
  const attributes: Record<string, unknown> = Object.fromEntries([
    ["specversion", pb.spec_version],
    ["id", pb.id === "" ? undefined : pb.id],
    ["source", pb.source === "" ? undefined : pb.source],
    ["type", pb.type === "" ? undefined : pb.type],
    ...Object.entries(pb.attributes ?? {}).map(([name, value]) => [name, attributeFromProto(`${field}${field === "" ? "" : "."}attributes.${name}`, value)] as const),
  ]);
  if (pb.data === "proto_data") {
    // Stored without it, the event would lose its data with no word said (the Go CloudEvents SDK
    // puts protobuf payloads there); a google.protobuf.Any has no content type of its own to keep.
    const at = `${field}${field === "" ? "" : "."}proto_data`;
    throw new ApiError("invalid_argument", `${at} is not accepted: send the payload as binary_data, with its datacontenttype`, {
      field: at,
      bound: "binary_data or text_data",
    });
  }
  if (pb.data === "binary_data") return { attributes, data: { kind: "bytes", bytes: pb.binary_data ?? new Uint8Array(0) } };
  if (pb.data === "text_data") return { attributes, data: { kind: "text", text: pb.text_data ?? "" } };
  return { attributes, data: { kind: "none" } };
}

/** 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, in seconds since 1970. */
const timestampSecondsMin = -62_135_596_800;
const timestampSecondsMax = 253_402_300_799;
const timestampBound = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z";

/** `path` names the attribute in errors: `events[0].attributes.time`. */
function attributeFromProto(path: string, value: PbAttributeValue): unknown {
  switch (value.attr) {
    case "ce_boolean":
      return value.ce_boolean;
    case "ce_integer":
      return value.ce_integer;
    case "ce_string":
      return value.ce_string;
    case "ce_uri":
      return value.ce_uri;
    case "ce_uri_ref":
      return value.ce_uri_ref;
    // The JSON format carries binary attributes as base64 and timestamps as RFC 3339.
    case "ce_bytes":
      return Buffer.from(value.ce_bytes ?? new Uint8Array(0)).toString("base64");
    case "ce_timestamp": {
      const instant = timestampToInstant(value.ce_timestamp);
      if (instant === undefined) return undefined;
      // google.protobuf.Timestamp's own range, which RFC 3339 can write: beyond it formatting fails.
      if (!(instant.seconds >= timestampSecondsMin && instant.seconds <= timestampSecondsMax && instant.nanos >= 0 && instant.nanos < 1e9)) {
        throw new ApiError("invalid_argument", `${path} must be a timestamp from ${timestampBound}, got seconds ${instant.seconds}, nanos ${instant.nanos}`, {
          field: path,
          bound: timestampBound,
        });
      }
      return formatRfc3339(instant);
    }
    default:
      return undefined;
  }
}
