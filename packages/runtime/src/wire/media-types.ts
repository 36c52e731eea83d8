/**
 * Media types as CloudEvents' `datacontenttype` and HTTP's Content-Type carry them. Shared by the
 * server and the client so both read a content type the same way.
 */
const mediaType = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(?:\s*;.*)?$/s;

/** A Worker's structured-clone body: readable only by workerd's deserializer. */
export const v8MediaType = "application/x-v8";
export const protobufMediaType = "application/x-protobuf";
export const jsonMediaType = "application/json";
/** The CloudEvents HTTP binding's structured mode (the body is one event) and batched mode (an array of events). */
export const cloudEventMediaType = "application/cloudevents+json";
export const cloudEventsBatchMediaType = "application/cloudevents-batch+json";

export function isMediaType(value: string): boolean {
  return mediaType.test(value);
}

/** `type/subtype`, lowercased, without parameters. */
export function mediaEssence(value: string): string {
  const semicolon = value.indexOf(";");
  return (semicolon < 0 ? value : value.slice(0, semicolon)).trim().toLowerCase();
}

/**
 * The CloudEvents JSON format's rule: a subtype of `json` or ending in `+json`, under any type
 * (application/json, text/json, application/cloudevents+json, ...).
 */
export function isJsonMediaType(value: string): boolean {
  const essence = mediaEssence(value);
  const slash = essence.indexOf("/");
  if (slash < 0) return false;
  const subtype = essence.slice(slash + 1);
  return subtype === "json" || subtype.endsWith("+json");
}

export function isProtobufMediaType(value: string): boolean {
  const essence = mediaEssence(value);
  return essence === protobufMediaType || essence === "application/protobuf" || essence === "application/vnd.google.protobuf";
}
